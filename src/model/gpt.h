// GPT-2: token + position embeddings, L pre-LayerNorm blocks (causal self-attention, 4C GELU MLP),
// final LayerNorm, LM head tied to the token embedding. The forward/backward schedule is written once
// against Backend&; the arenas (parameters, gradients, activations) are sized from the config here.
#pragma once

#include "backend/backend.h"
#include "config/config.h"
#include "core/arena.h"
#include "memory/activation_plan.h"
#include "layout/parameter_layout.h"
#include "model/lora.h"
#include "precision/fp8_state.h"
#include "precision/precision_layout.h"
#include "precision/recipe.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

namespace gpt {

// FLOPs the model issued (matrix products 2MNK; attention 4*B*T^2*C forward, twice that backward, the
// full T x T square counted); elementwise ops are not counted.
struct FlopCounts {
  double forward = 0.0;    // the first forward of each micro-batch
  double recompute = 0.0;  // forwards rerun in backward by the recompute policy
  double backward = 0.0;
};

// Coordinates of one forward/backward, which key the dropout streams: a recomputed or replayed
// forward with the same context draws the same masks.
struct StepContext {
  uint64_t seed = 0;
  uint32_t step = 0;
  uint32_t micro_step = 0;
  bool training = true;  // dropout on
};

class GPT {
 public:
  // batch_size and seq_len are the largest micro-batch the activation arena is planned for.
  // precision: the mixed-precision recipe the model emulates (below); its plan holds what the recipe needs.
  // lora: with a rank > 0 the base weights are frozen and held only in the compute format, and the trained
  // parameters (parameter_layout(), the parameter and gradient arenas, num_parameters()) are the adapters.
  // masters_host: where given, the FP32 masters live in that backend's memory (the host's, for
  // memory.offload: optimizer, whose AdamW updates them there), not on the device, which holds the compute
  // copy. How it is made from them is host_masters_path's (layout/parameter_layout.h): in bf16/fp16 from a
  // twin of it in host memory, which crosses the bus in the compute format; under fp8 through a staging
  // buffer on the device (master_staging_layout) that the masters cross a slice at a time to be cast with
  // their scales. The host arenas are pinned through `backend` where it gives pinned memory, so that those
  // copies run on its copy stream. Needs a recipe with a compute copy and no LoRA.
  GPT(const ModelConfig& config, int batch_size, int seq_len, Backend& backend, DType dtype = DType::F32,
      const RecomputePolicy& recompute = {}, const PrecisionRecipe& precision = {}, const LoraSpec& lora = {},
      Backend* masters_host = nullptr);
  ~GPT();

  const ModelConfig& config() const { return config_; }
  Backend& backend() { return backend_; }
  DType dtype() const { return dtype_; }
  int max_batch_size() const { return max_batch_; }
  int max_seq_len() const { return max_seq_; }
  // The trained parameters: every weight, or under LoRA the adapters.
  int64_t num_parameters() const { return layout_.num_parameters(); }
  const ParameterLayout& parameter_layout() const { return layout_; }
  const LoraSpec& lora() const { return lora_; }
  // The GPT-2 weights in llm.c order: the masters, or under LoRA the frozen base.
  int64_t num_base_parameters() const { return base_layout().num_parameters(); }
  const ParameterLayout& base_layout() const { return lora_.enabled() ? *base_layout_ : layout_; }
  // Under LoRA: the frozen base in its compute format, the adapters' compute copy (null in fp32) and the
  // products' scratch; null otherwise.
  Arena* base_arena() { return base_arena_.get(); }
  Arena* lora_compute_arena() { return lora_compute_arena_.get(); }
  Arena* lora_scratch_arena() { return lora_scratch_.get(); }
  // Writable: whatever writes the masters through it (the optimizer, a broadcast) makes the compute copy
  // of the weights stale, so the next forward casts it again. Its memory is the device's, or with
  // masters_host that backend's.
  Arena& parameter_arena() {
    mark_compute_stale();
    return params_arena_;
  }
  bool masters_on_host() const { return masters_on_host_; }
  // With the masters on the host: whether they, and the compute copy's host twin where there is one, are the
  // device backend's pinned memory (else ordinary memory, where pinning was refused or the backend has none,
  // each copy from it holding the host).
  bool masters_pinned() const {
    return masters_on_host_ && params_arena_.pinned() && (!host_compute_ || host_compute_->pinned());
  }
  // With the masters on the host under fp8 on a GPU: the device's staging buffer they are cast from; null
  // otherwise.
  Arena* master_staging_arena() { return master_staging_.get(); }
  // With the masters on the host in bf16/fp16 on a GPU: the compute copy's twin in host memory, which the
  // host casts or updates into and which crosses the bus in the compute format; null otherwise.
  Arena* host_compute_arena() { return host_compute_.get(); }
  // With the masters on the host: device memory they may cross through, bytes at a time, outside a step (the
  // data-parallel broadcast at start): the staging buffer, or else the compute copy itself, which is stale
  // from then on, so the next forward casts it again.
  Tensor master_bounce_buffer();
  Arena& gradient_arena() { return grads_arena_; }
  Arena& activation_arena() { return acts_arena_; }
  // The compute copy of the weights; null in fp32.
  Arena* compute_weight_arena() { return compute_arena_.get(); }
  // The compute copy as slices of the masters, for an optimizer that writes it as it updates them
  // (AdamW::write_compute_copy); empty where the forward casts it: fp32 (there is none), fp8 (each step's
  // first forward casts every weight, the FP8 ones with that step's scales), LoRA (the copy is the
  // adapters'). With the masters on the host the slices are of the host twin where there is one (the
  // optimizer, on the host, writes it; compute_part_written sends it).
  std::vector<ComputeCopySlice> compute_copy_slices();
  // The optimizer has just written the whole compute copy from the masters it updated.
  void compute_copy_written() { compute_stale_ = false; }
  const ActivationPlan& activation_plan() const { return plan_; }
  const FlopCounts& flops() const { return flops_; }
  void reset_flops() { flops_ = {}; }
  const ParameterTensors& params() const { return params_; }
  const ParameterTensors& grads() const { return grads_; }

  // Mixed precision (precision.recipe): every tensor is stored in the format the precision layout gives it
  // (precision/precision_layout.h) and each op stores its output in its output's format, so the model has
  // one code path for every recipe. With a compute dtype other than the masters', the FP32 masters are
  // cast into a compute copy (BF16/F16; E4M3 with its scale for an FP8 block's linear weights) by the
  // first forward after they may have changed, not by every micro-batch. fp8: an FP8 block's linear inputs are stored as E4M3 by the op that produces them (after a
  // BF16 attention output; under current scaling after an FP32 source whose amax sets the scale), and with
  // backward e5m2 each output gradient is cast to E5M2 for both backward products (the bias gradient
  // reads the BF16 gradient). Parameter gradients accumulate in precision.grad_dtype.
  DType compute_dtype() const { return precision_.compute(); }
  const PrecisionRecipe& precision() const { return precision_.recipe(); }
  const PrecisionLayout& precision_layout() const { return precision_; }
  // The FP8 scaling state; null unless the recipe is fp8.
  Fp8State* fp8() { return fp8_.get(); }
  // The weights the products multiply: the compute copy, or the masters in fp32.
  const ModelParameters& compute_params() const { return compute_; }
  // The compute copy of the weights from the masters (under LoRA: of the adapters): every forward starts
  // with it; a decoder that runs the compute copy outside forward (model/kv_cache_decoder.h) calls it once
  // the masters are final.
  void refresh_compute_weights();
  // Block l's adapter on target t without dropout, out += s in A^T B^T (nothing without one): what the
  // forward adds after the base product, for a decoder that runs the products itself.
  void lora_inference(int l, LoraTarget t, const Tensor& out, const Tensor& in);
  // With the masters on the host, outside fp8: the offloaded AdamW has just written block `block`'s part
  // ([0, L), or -1 for the tensors outside the blocks) of the compute_copy_slices as it updated its masters;
  // its part of the host twin is queued to the device now, so that it crosses the bus beside the update of
  // the next blocks, and the next forward casts only what has not been written.
  void compute_part_written(int block);

  // GPT-2 initialisation: N(0, init_std), residual projections N(0, init_std/sqrt(2L)), biases 0,
  // LayerNorm gains 1; padded vocabulary rows 0. Under LoRA this draws the base, then init_adapters(seed).
  void init_weights(uint64_t seed);
  // LoRA: A from PEFT's Kaiming-uniform U(-1/sqrt(in), 1/sqrt(in)), B zero, so the model is the base's.
  void init_adapters(uint64_t seed);
  // The trained parameters as a flat host vector in layout order (the arena has alignment gaps; this has
  // none): the whole model in llm.c order, or under LoRA the adapters.
  std::vector<float> parameters_to_host();
  void parameters_from_host(std::span<const float> flat);
  // The GPT-2 weights in llm.c order, whichever arena holds them (under LoRA the base, rounded to the
  // compute format as it is loaded).
  std::vector<float> base_to_host();
  void base_from_host(std::span<const float> flat);

  // Forward over a B x T micro-batch. With targets, the per-token losses are computed; with
  // dloss > 0 the fused cross-entropy also leaves dlogits for backward (the logits are overwritten).
  // targets may be empty (sampling): then only the logits are computed.
  void forward(std::span<const int32_t> tokens, std::span<const int32_t> targets, int B, int T,
               const StepContext& ctx, float dloss = 0.0f);
  // Sum of the per-token losses of the last forward (targets -1 contribute 0), in double.
  double loss_sum();
  // Logits of position t of sequence b after a forward without dloss: vocab_size floats.
  std::vector<float> logits_at(int b, int t);
  // Backward of the last forward (which must have had dloss > 0); gradients accumulate (+=).
  // on_gradients_ready(l) is called once block l's parameter gradients are final for this backward,
  // and on_gradients_ready(-1) at the end for the embeddings and the final LayerNorm, so a caller can
  // start reducing them while earlier blocks are still being processed.
  void backward(const StepContext& ctx, const std::function<void(int block)>& on_gradients_ready = {});
  void zero_grads();
  // The whole gradient arena as one flat tensor (alignment gaps stay zero), and its squared L2 norm.
  Tensor gradients_flat();
  double gradient_norm_squared();

 private:
  // Views of block l's activations for a B x T micro-batch, each in its format, and of its input.
  struct BlockViews {
    Tensor t[kBlockTensors];
    const Tensor& operator[](BlockTensor k) const { return t[static_cast<int>(k)]; }
  };
  BlockViews block_views(int l, int B, int T);
  Tensor block_input(int l, int B, int T);
  // An activation buffer outside the blocks, seen with `dims`.
  Tensor act(ModelTensor t, std::initializer_list<int64_t> dims);
  Tensor view(int buffer, std::initializer_list<int64_t> dims, TensorFormat format);
  void block_forward(int l, int B, int T, const StepContext& ctx, double& flop_counter, bool ln1_ready,
                     bool norm_next);
  void block_backward(int l, int B, int T, const StepContext& ctx);
  void linear(const Tensor& out, const Tensor& in, const Tensor& weight, const Tensor& bias, double& flop_counter);
  // The plan's fp8.staging for the FP8 products' operand copies (MatmulArgs::staging), or empty.
  Tensor matmul_staging();
  // Block l's adapter on target t, when it has one: out += s drop(in) A^T B^T, and its backward.
  void lora_forward(int l, LoraTarget t, const Tensor& out, const Tensor& in, const StepContext& ctx, double& flop_counter);
  void lora_backward(int l, LoraTarget t, const Tensor& din, const Tensor& dout, const Tensor& in, const StepContext& ctx);
  DropoutSpec lora_dropout(const StepContext& ctx, uint32_t layer, LoraTarget t) const;
  // din = dout W, dW += dout^T in, db += sums of dout. In an FP8 block with backward e5m2 both products read
  // dout's E5M2 copy (`which` names the layer's scaling slot).
  void linear_backward(const Tensor& din, const Tensor& dweight, const Tensor& dbias, const Tensor& dout,
                       const Tensor& in, const Tensor& weight, int layer = -1, Fp8Linear which = Fp8Linear::Count);
  // Runs `produce` into block l's tensor t, or, where the layout's source format is wider than t's FP8
  // format, into a staging buffer in that format, which is then cast into t (under current scaling after
  // its amax has set t's scale). Every other store is fused into the producing op.
  template <class Produce>
  void produce(int l, BlockTensor t, const Tensor& dst, Produce&& op);
  // Casts src into the FP8 tensor dst through its scaling slot, scaling it first under current scaling.
  void cast_fp8(const Tensor& dst, const Tensor& src);
  // Casts the master tensor src into its compute copy dst: directly; with the masters on the host, on the
  // host into dst's twin, which then crosses to dst; or through the staging buffer, in pieces of its size
  // (one piece for a tensor with a scale, whose slice fits).
  void cast_master(const Tensor& dst, const Tensor& src, const Tensor& twin);
  // Casts block `block`'s masters (-1: the tensors outside the blocks) into the compute copy.
  void cast_part(int block);
  // f(compute copy, master, host twin or an empty tensor) for each tensor of block `block` (-1: outside).
  template <class F>
  void for_each_part_tensor(int block, F&& f);
  // The masters may have changed: the whole compute copy is stale.
  void mark_compute_stale() {
    compute_stale_ = true;
    part_fresh_.assign(part_fresh_.size(), false);
  }
  DropoutSpec dropout(const StepContext& ctx, uint32_t layer, RngSite site) const;
  // Sum of t's elements in double, read back through host_staging_: no allocation in the step.
  double host_sum(const Tensor& t);

  ModelConfig config_;
  LoraSpec lora_;
  Backend& backend_;
  Backend& masters_backend_;
  DType dtype_;
  int max_batch_, max_seq_;
  PrecisionLayout precision_;
  ParameterLayout layout_, grads_layout_;
  ActivationPlan plan_;
  Arena params_arena_, grads_arena_, acts_arena_;
  ParameterTensors params_, grads_;
  ModelParameters masters_, grad_blocks_;  // params_ and grads_ per block
  bool masters_on_host_ = false;
  std::unique_ptr<Arena> master_staging_;  // the masters on the host under fp8 on a GPU; null otherwise
  std::unique_ptr<Arena> host_compute_;    // the masters on the host in bf16/fp16 on a GPU; null otherwise
  ModelParameters host_compute_views_;
  std::unique_ptr<Arena> compute_arena_;  // the compute copy of the weights; null in fp32
  ModelParameters compute_;               // the compute copy, or the masters per block
  bool compute_stale_ = true;             // the masters may differ from what compute_ was cast from
  // With the masters on the host: the parts (blocks 0..L-1, then the tensors outside them) that
  // the update has written since compute_stale_ was set (compute_part_written); empty otherwise.
  std::vector<bool> part_fresh_;
  std::unique_ptr<Fp8State> fp8_;
  // LoRA: the frozen base (compute format), the adapters' compute copy (null in fp32) and per-block views
  // of the adapters, their gradients and that copy; the products' scratch.
  std::unique_ptr<ParameterLayout> base_layout_;
  std::unique_ptr<Arena> base_arena_, lora_compute_arena_, lora_scratch_;
  std::vector<LoraBlock> lora_masters_, lora_grads_, lora_compute_;
  std::unique_ptr<LoraProducts> lora_products_;
  FlopCounts flops_;
  int last_B_ = 0, last_T_ = 0;
  bool last_has_dlogits_ = false;
  std::vector<std::byte> host_staging_;  // B x T losses at most, sized at construction
};

}  // namespace gpt
