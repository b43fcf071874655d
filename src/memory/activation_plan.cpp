#include "memory/activation_plan.h"

#include "backend/matmul_staging.h"

#include <algorithm>
#include <map>

namespace gpt {

const char* activation_use_name(ActivationUse u) {
  static constexpr const char* kNames[] = {"stored block activations", "block inputs (checkpoints)",
                                           "recompute workspace", "logits and loss", "temporaries"};
  return kNames[static_cast<int>(u)];
}

uint64_t ActivationPlan::bytes(ActivationUse u) const {
  uint64_t total = 0;
  for (size_t i = 0; i < use.size(); ++i)
    if (use[i] == u) total += ArenaLayout::aligned(layout.buffer(i).bytes);
  return total;
}

namespace {

// Buffers by name: a later request for a name shares the first one's buffer, which grows to the widest
// format requested. The layout is laid out once every request is in.
class PlanBuilder {
 public:
  int buffer(const std::string& name, std::vector<int64_t> shape, DType dtype, ActivationUse use) {
    auto it = index_.find(name);
    if (it != index_.end()) {
      Entry& e = entries_[static_cast<size_t>(it->second)];
      GPT_CHECK(e.shape == shape, "activation buffer '{}' requested with two shapes", name);
      if (dtype_size(dtype) > dtype_size(e.dtype)) e.dtype = dtype;
      return it->second;
    }
    const int index = static_cast<int>(entries_.size());
    entries_.push_back({name, std::move(shape), dtype, use});
    index_[name] = index;
    return index;
  }

  void finish(ActivationPlan& plan) const {
    for (const Entry& e : entries_) {
      plan.layout.add(e.name, std::span<const int64_t>(e.shape), e.dtype);
      plan.use.push_back(e.use);
    }
  }

 private:
  struct Entry {
    std::string name;
    std::vector<int64_t> shape;
    DType dtype;
    ActivationUse use;
  };
  std::vector<Entry> entries_;
  std::map<std::string, int> index_;
};

}  // namespace

uint64_t fp8_staging_bytes(const ModelConfig& m, const PrecisionLayout& precision, int64_t rows) {
  const int64_t C = m.n_embd;
  // Each FP8 linear layer: its input tensor, weight, and input and output widths.
  struct Linear {
    Fp8Linear which;
    BlockTensor input;
    const char* weight;
    int64_t in, out;
  };
  const Linear linears[] = {{Fp8Linear::Qkv, BlockTensor::Ln1, "qkvw", C, 3 * C},
                            {Fp8Linear::AttnProj, BlockTensor::Atty, "attprojw", C, C},
                            {Fp8Linear::Fc, BlockTensor::Ln2, "fcw", C, 4 * C},
                            {Fp8Linear::FcProj, BlockTensor::FchGelu, "fcprojw", 4 * C, C}};
  uint64_t most = 0;
  for (int l = 0; l < m.n_layer; ++l) {
    if (!precision.fp8_block(l)) continue;
    for (const Linear& f : linears) {
      const DType x = precision.block(l, f.input).dtype, w = precision.compute_weight(f.weight, l).dtype;
      const DType dy = precision.output_grad(l, f.which).dtype;
      // GPT::linear and GPT::linear_backward: y = x W^T, dx = dy W, dW += dy^T x.
      for (const ProductShape& p : {ProductShape{x, w, rows, f.out, f.in, false, true},
                                    ProductShape{dy, w, rows, f.in, f.out, false, false},
                                    ProductShape{dy, x, f.out, f.in, rows, true, false}})
        most = std::max<uint64_t>(most, matmul_staging(p).bytes);
    }
  }
  return most;
}

ActivationPlan plan_activations(const ModelConfig& m, const PrecisionLayout& precision, MicroBatch micro,
                                bool keeps_probs, const RecomputePolicy& policy, bool stages_fp8_operands) {
  ActivationPlan plan;
  plan.policy = policy;
  PlanBuilder pb;
  const int64_t L = m.n_layer, C = m.n_embd, NH = m.n_head, Vp = m.padded_vocab_size();
  const int64_t B = micro.batch_size, T = micro.seq_len;
  GPT_CHECK(precision.n_layer() == L, "precision layout for {} blocks, model has {}", precision.n_layer(), L);
  plan.model_buffer.fill(-1);
  auto model_tensor = [&](ModelTensor t, std::vector<int64_t> shape, ActivationUse use) {
    plan.model_buffer[static_cast<size_t>(t)] = pb.buffer(model_tensor_name(t), std::move(shape), precision.model(t).dtype, use);
  };

  model_tensor(ModelTensor::Tokens, {B, T}, ActivationUse::Head);
  model_tensor(ModelTensor::Targets, {B, T}, ActivationUse::Head);
  model_tensor(ModelTensor::Encoded, {B, T, C}, ActivationUse::BlockInput);

  auto dims = [&](BlockTensor t) -> std::vector<int64_t> {
    switch (t) {
      case BlockTensor::Qkv: return {B, T, 3 * C};
      case BlockTensor::Fch: case BlockTensor::FchGelu: return {B, T, 4 * C};
      case BlockTensor::Probs: return keeps_probs ? std::vector<int64_t>{B, NH, T, T} : std::vector<int64_t>{B, NH, T};
      case BlockTensor::Ln1Mean: case BlockTensor::Ln1Rstd: case BlockTensor::Ln2Mean: case BlockTensor::Ln2Rstd:
        return {B, T};
      default: return {B, T, C};
    }
  };

  plan.block_buffer.resize(static_cast<size_t>(L));
  for (int l = 0; l < L; ++l) {
    for (int k = 0; k < kBlockTensors; ++k) {
      const auto t = static_cast<BlockTensor>(k);
      // A fused attention keeps each row's log-sum-exp where a materialised one keeps the probabilities.
      const std::string kind = t == BlockTensor::Probs && !keeps_probs ? "lse" : block_tensor_name(t);
      const DType dtype = precision.block(l, t).dtype;
      int& slot = plan.block_buffer[l][k];
      if (t == BlockTensor::Out) {
        // A block's output is kept when it starts another segment or feeds the final LayerNorm;
        // inside a full-recompute segment it goes to the segment's output slots, rebuilt in backward.
        const bool inner = policy.full(l) && l + 1 < policy.segment_end(l);
        slot = inner ? pb.buffer("segment" + std::to_string(l - policy.segment_start(l)) + ".out", dims(t),
                                 dtype, ActivationUse::RecomputeWorkspace)
                     : pb.buffer("block" + std::to_string(l) + ".out", dims(t), dtype, ActivationUse::BlockInput);
        continue;
      }
      if (policy.full(l)) {
        // One block's internals: every full-recompute block is rebuilt into the same workspace.
        slot = pb.buffer("recompute." + kind, dims(t), dtype, ActivationUse::RecomputeWorkspace);
        continue;
      }
      const bool scratch = policy.selective(l) &&
                           ((policy.layernorm && (t == BlockTensor::Ln1 || t == BlockTensor::Ln2)) ||
                            (policy.attention && keeps_probs && t == BlockTensor::Probs) || (policy.gelu && t == BlockTensor::FchGelu));
      if (scratch) {
        // One buffer per recomputed kind serves every block: LayerNorm 1 and 2 outputs share one.
        const std::string name = (t == BlockTensor::Ln1 || t == BlockTensor::Ln2) ? "scratch.ln" : "scratch." + kind;
        slot = pb.buffer(name, dims(t), dtype, ActivationUse::Scratch);
      } else {
        slot = pb.buffer("block" + std::to_string(l) + "." + kind, dims(t), dtype, ActivationUse::BlockStored);
      }
    }
  }

  model_tensor(ModelTensor::Lnf, {B, T, C}, ActivationUse::Head);
  model_tensor(ModelTensor::LnfMean, {B, T}, ActivationUse::Head);
  model_tensor(ModelTensor::LnfRstd, {B, T}, ActivationUse::Head);
  model_tensor(ModelTensor::Logits, {B, T, Vp}, ActivationUse::Head);
  model_tensor(ModelTensor::Losses, {B, T}, ActivationUse::Head);
  // Temporaries: the branch output of the forward pass, and the backward pass's gradients, reused by
  // every block.
  model_tensor(ModelTensor::Branch, {B, T, C}, ActivationUse::Scratch);
  model_tensor(ModelTensor::SumSquares, {1}, ActivationUse::Scratch);
  model_tensor(ModelTensor::DResidual, {B, T, C}, ActivationUse::Scratch);
  model_tensor(ModelTensor::DBranch, {B, T, C}, ActivationUse::Scratch);
  model_tensor(ModelTensor::DAtty, {B, T, C}, ActivationUse::Scratch);
  model_tensor(ModelTensor::DQkv, {B, T, 3 * C}, ActivationUse::Scratch);
  model_tensor(ModelTensor::DFch, {B, T, 4 * C}, ActivationUse::Scratch);
  // The attention backward's scratch: dS over the probabilities, or a fused backward's rowsum(dout * out).
  model_tensor(ModelTensor::DProbs, keeps_probs ? std::vector<int64_t>{B, NH, T, T} : std::vector<int64_t>{B, NH, T},
               ActivationUse::Scratch);
  if (precision.any_fp8() && precision.e5m2_backward())
    model_tensor(ModelTensor::Fp8OutputGrad, {B, T, 4 * C}, ActivationUse::Scratch);
  if (precision.current_scaling()) model_tensor(ModelTensor::Fp8Source, {B, T, 4 * C}, ActivationUse::Scratch);
  if (stages_fp8_operands) {
    if (const uint64_t bytes = fp8_staging_bytes(m, precision, B * T); bytes > 0)
      plan.matmul_staging = pb.buffer("fp8.staging", {static_cast<int64_t>(bytes)}, DType::U8, ActivationUse::Scratch);
  }
  pb.finish(plan);
  return plan;
}

}  // namespace gpt
