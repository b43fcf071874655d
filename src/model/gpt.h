// GPT-2: token + position embeddings, L pre-LayerNorm blocks (causal self-attention, 4C GELU MLP),
// final LayerNorm, LM head tied to the token embedding. The forward/backward schedule is written once
// against Backend&; the arenas (parameters, gradients, activations) are sized from the config here.
#pragma once

#include "backend/backend.h"
#include "config/config.h"
#include "core/arena.h"
#include "memory/activation_plan.h"
#include "model/fp8_gemms.h"
#include "model/parameters.h"
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
  GPT(const ModelConfig& config, int batch_size, int seq_len, Backend& backend, DType dtype = DType::F32,
      const RecomputePolicy& recompute = {}, const PrecisionRecipe& precision = {});
  ~GPT();

  const ModelConfig& config() const { return config_; }
  Backend& backend() { return backend_; }
  DType dtype() const { return dtype_; }
  int max_batch_size() const { return max_batch_; }
  int max_seq_len() const { return max_seq_; }
  int64_t num_parameters() const { return layout_.num_parameters(); }
  const ParameterLayout& parameter_layout() const { return layout_; }
  Arena& parameter_arena() { return params_arena_; }
  Arena& gradient_arena() { return grads_arena_; }
  Arena& activation_arena() { return acts_arena_; }
  const ActivationPlan& activation_plan() const { return plan_; }
  const FlopCounts& flops() const { return flops_; }
  void reset_flops() { flops_ = {}; }
  const ParameterTensors& params() const { return params_; }
  const ParameterTensors& grads() const { return grads_; }

  // Mixed-precision emulation (precision.recipe): with compute BF16 or F16, every forward first refreshes
  // a compute copy of the weights, quantize_roundtrip(master), in a second parameter arena, and every
  // activation and activation gradient the GPU would store in that format is rounded to it after the op
  // that produces it; LayerNorm statistics, softmax probabilities, the losses and the parameter gradients
  // stay FP32. Storage stays F32 (dtype()), so the values are exactly the GPU's, not their size.
  // fp8 (compute BF16): in every block outside precision.fp8.bf16_layers, the four linear layers'
  // weights are cast from the masters to E4M3 in the compute copy, their inputs are stored as E4M3 (the
  // cast fused into the LayerNorm or GELU that produces them, after the attention output's BF16), and
  // with backward e5m2 their output gradients are cast to E5M2 for both backward products (the bias
  // gradient reads the BF16 gradient). Each cast uses its tensor's scale in fp8() and records its amax.
  // grad_dtype BF16/F16: each parameter gradient is rounded to it once its backward has added to it,
  // as a gradient buffer in that format between micro-batches would hold it.
  DType compute_dtype() const { return compute_dtype_; }
  const PrecisionRecipe& precision() const { return precision_; }
  // The FP8 scaling state; null unless the recipe is fp8.
  Fp8Gemms* fp8() { return fp8_.get(); }
  const ParameterTensors& compute_params() const { return compute_arena_ ? compute_params_ : params_; }

  // GPT-2 initialisation: N(0, init_std), residual projections N(0, init_std/sqrt(2L)), biases 0,
  // LayerNorm gains 1; padded vocabulary rows 0.
  void init_weights(uint64_t seed);
  // Parameters as a flat host vector in llm.c order (the arena has alignment gaps; this has none).
  std::vector<float> parameters_to_host();
  void parameters_from_host(std::span<const float> flat);

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
  // Views of block l's activations for a B x T micro-batch, and of its input.
  struct BlockViews {
    Tensor t[kBlockTensors];
    const Tensor& operator[](BlockTensor k) const { return t[static_cast<int>(k)]; }
  };
  BlockViews block_views(int l, int B, int T);
  Tensor block_input(int l, int B, int T);
  Tensor act(const char* name, std::initializer_list<int64_t> dims) { return acts_arena_.tensor(name).prefix(dims); }
  void block_forward(int l, int B, int T, const StepContext& ctx, double& flop_counter);
  void block_backward(int l, int B, int T, const StepContext& ctx);
  void linear(const Tensor& out, const Tensor& in, const Tensor& weight, const Tensor& bias, double& flop_counter);
  // FP8 layers (fp8_ and a block that uses it): the output gradient's E5M2 cast when the backward is e5m2.
  void linear_backward(const Tensor& din, const Tensor& dweight, const Tensor& dbias, const Tensor& dout,
                       const Tensor& in, const Tensor& weight, int layer = -1, Fp8Linear which = Fp8Linear::Count);
  // Stores x, the input of block l's linear layer `which`, in the format that layer multiplies: E4M3
  // in an FP8 block, else the compute dtype.
  void store_gemm_input(const Tensor& x, int l, Fp8Linear which);
  bool fp8_block(int l) const { return fp8_ && fp8_->layer_uses_fp8(l); }
  // The compute copy of the weights from the masters, FP8 weights cast with their scales.
  void refresh_compute_weights();
  // Rounds the parameter gradients of block l (-1: the embeddings and final LayerNorm) to grad_dtype.
  void round_gradients(int l);
  DropoutSpec dropout(const StepContext& ctx, uint32_t layer, RngSite site) const;
  // Rounds t in place to the compute dtype (nothing in FP32).
  void round_to_compute(const Tensor& t);
  // Sum of t's elements in double, read back through host_staging_: no allocation in the step.
  double host_sum(const Tensor& t);

  ModelConfig config_;
  Backend& backend_;
  DType dtype_;
  int max_batch_, max_seq_;
  ParameterLayout layout_;
  ActivationPlan plan_;
  Arena params_arena_, grads_arena_, acts_arena_;
  ParameterTensors params_, grads_;
  PrecisionRecipe precision_;
  DType compute_dtype_ = DType::F32;
  std::unique_ptr<Arena> compute_arena_;  // the compute copy of the weights; null in FP32
  std::unique_ptr<Fp8Gemms> fp8_;
  ParameterTensors compute_params_;
  FlopCounts flops_;
  int last_B_ = 0, last_T_ = 0;
  bool last_has_dlogits_ = false;
  std::vector<std::byte> host_staging_;  // B x T losses at most, sized at construction
};

}  // namespace gpt
