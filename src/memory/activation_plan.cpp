#include "memory/activation_plan.h"

#include <map>

namespace gpt {

const char* block_tensor_name(BlockTensor t) {
  static constexpr const char* kNames[] = {"ln1", "ln1_mean", "ln1_rstd", "qkv", "atty", "probs", "residual2",
                                           "ln2", "ln2_mean", "ln2_rstd", "fch", "fch_gelu", "out"};
  return kNames[static_cast<int>(t)];
}

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

class PlanBuilder {
 public:
  explicit PlanBuilder(ActivationPlan& plan) : plan_(plan) {}

  // Adds the buffer once; later requests for the same name share it.
  int buffer(const std::string& name, std::initializer_list<int64_t> shape, DType dtype, ActivationUse use) {
    auto it = index_.find(name);
    if (it != index_.end()) return it->second;
    const int index = static_cast<int>(plan_.layout.add(name, shape, dtype));
    plan_.use.push_back(use);
    index_[name] = index;
    return index;
  }

 private:
  ActivationPlan& plan_;
  std::map<std::string, int> index_;
};

}  // namespace

ActivationPlan plan_activations(const ModelConfig& m, const ActivationShape& shape, const RecomputePolicy& policy) {
  ActivationPlan plan;
  plan.policy = policy;
  PlanBuilder pb(plan);
  const int64_t L = m.n_layer, C = m.n_embd, NH = m.n_head, Vp = m.padded_vocab_size();
  const int64_t B = shape.batch_size, T = shape.seq_len;
  const DType dt = shape.dtype;
  // LayerNorm statistics, softmax probabilities and the losses stay FP32 under every recipe.
  const DType fp32_dt = dt == DType::BF16 || dt == DType::F16 ? DType::F32 : dt;

  pb.buffer("tokens", {B, T}, DType::I32, ActivationUse::Head);
  pb.buffer("targets", {B, T}, DType::I32, ActivationUse::Head);
  pb.buffer("encoded", {B, T, C}, dt, ActivationUse::BlockInput);

  auto dims = [&](BlockTensor t) -> std::vector<int64_t> {
    switch (t) {
      case BlockTensor::Qkv: return {B, T, 3 * C};
      case BlockTensor::Fch: case BlockTensor::FchGelu: return {B, T, 4 * C};
      case BlockTensor::Probs: return {B, NH, T, T};
      case BlockTensor::Ln1Mean: case BlockTensor::Ln1Rstd: case BlockTensor::Ln2Mean: case BlockTensor::Ln2Rstd:
        return {B, T};
      default: return {B, T, C};
    }
  };
  // Where activations are 16-bit (the GPU's layout), an FP8 block stores its linear layers' inputs in E4M3.
  const bool narrow = dt == DType::BF16 || dt == DType::F16;
  auto fp8_input = [&](int l, BlockTensor t) {
    return narrow && static_cast<size_t>(l) < shape.fp8_blocks.size() && shape.fp8_blocks[l] &&
           (t == BlockTensor::Ln1 || t == BlockTensor::Atty || t == BlockTensor::Ln2 || t == BlockTensor::FchGelu);
  };
  auto add = [&](const std::string& name, BlockTensor t, ActivationUse use, DType stored) {
    const std::vector<int64_t> d = dims(t);
    if (d.size() == 2) return pb.buffer(name, {d[0], d[1]}, fp32_dt, use);  // mean, rstd
    if (d.size() == 3) return pb.buffer(name, {d[0], d[1], d[2]}, stored, use);
    return pb.buffer(name, {d[0], d[1], d[2], d[3]}, fp32_dt, use);  // probs
  };

  plan.block_buffer.resize(static_cast<size_t>(L));
  for (int l = 0; l < L; ++l) {
    for (int k = 0; k < kBlockTensors; ++k) {
      const auto t = static_cast<BlockTensor>(k);
      const std::string kind = block_tensor_name(t);
      int& slot = plan.block_buffer[l][k];
      if (t == BlockTensor::Probs && !shape.keeps_probs) {
        slot = -1;
        continue;
      }
      if (t == BlockTensor::Out) {
        // A block's output is kept when it starts another segment or feeds the final LayerNorm;
        // inside a full-recompute segment it goes to the segment's output slots, rebuilt in backward.
        const bool inner = policy.full(l) && l + 1 < policy.segment_end(l);
        slot = inner ? add("segment" + std::to_string(l - policy.segment_start(l)) + ".out", t,
                           ActivationUse::RecomputeWorkspace, dt)
                     : add("block" + std::to_string(l) + ".out", t, ActivationUse::BlockInput, dt);
        continue;
      }
      if (policy.full(l)) {
        // One block's internals: every full-recompute block is rebuilt into the same workspace.
        // Shared by FP8 and 16-bit blocks alike, so sized for the wider format.
        slot = add("recompute." + kind, t, ActivationUse::RecomputeWorkspace, dt);
        continue;
      }
      const bool scratch = policy.selective(l) &&
                           ((policy.layernorm && (t == BlockTensor::Ln1 || t == BlockTensor::Ln2)) ||
                            (policy.attention && t == BlockTensor::Probs) || (policy.gelu && t == BlockTensor::FchGelu));
      if (scratch) {
        // One buffer per recomputed kind serves every block: LayerNorm 1 and 2 outputs share one.
        const std::string name = (t == BlockTensor::Ln1 || t == BlockTensor::Ln2) ? "scratch.ln" : "scratch." + kind;
        slot = add(name, t, ActivationUse::Scratch, dt);
      } else {
        slot = add("block" + std::to_string(l) + "." + kind, t, ActivationUse::BlockStored,
                   fp8_input(l, t) ? DType::E4M3 : dt);
      }
    }
  }

  pb.buffer("lnf", {B, T, C}, dt, ActivationUse::Head);
  pb.buffer("lnf_mean", {B, T}, fp32_dt, ActivationUse::Head);
  pb.buffer("lnf_rstd", {B, T}, fp32_dt, ActivationUse::Head);
  pb.buffer("logits", {B, T, Vp}, dt, ActivationUse::Head);
  pb.buffer("losses", {B, T}, fp32_dt, ActivationUse::Head);
  // Temporaries: the branch output of the forward pass, and the backward pass's gradients, reused by
  // every block.
  pb.buffer("branch", {B, T, C}, dt, ActivationUse::Scratch);
  pb.buffer("sum_squares", {1}, fp32_dt, ActivationUse::Scratch);
  pb.buffer("dresidual", {B, T, C}, dt, ActivationUse::Scratch);
  pb.buffer("dbranch", {B, T, C}, dt, ActivationUse::Scratch);
  pb.buffer("datty", {B, T, C}, dt, ActivationUse::Scratch);
  pb.buffer("dqkv", {B, T, 3 * C}, dt, ActivationUse::Scratch);
  pb.buffer("dfch", {B, T, 4 * C}, dt, ActivationUse::Scratch);
  if (shape.keeps_probs) pb.buffer("dprobs", {B, NH, T, T}, fp32_dt, ActivationUse::Scratch);
  if (shape.fp8_output_grads) pb.buffer("fp8.output_grad", {B, T, 4 * C}, narrow ? DType::E5M2 : dt, ActivationUse::Scratch);
  return plan;
}

void set_fp8_fields(ActivationShape& shape, const PrecisionRecipe& recipe, int n_layer) {
  shape.fp8_blocks.assign(static_cast<size_t>(n_layer), false);
  bool any = false;
  for (int l = 0; l < n_layer; ++l) any |= shape.fp8_blocks[l] = recipe.layer_uses_fp8(l, n_layer);
  shape.fp8_output_grads = any && recipe.fp8.backward == Fp8Backward::E5M2;
}

}  // namespace gpt
