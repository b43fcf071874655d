// GPT-2: token + position embeddings, L pre-LayerNorm blocks (causal self-attention, 4C GELU MLP),
// final LayerNorm, LM head tied to the token embedding. The forward/backward schedule is written once
// against Backend&; the arenas (parameters, gradients, activations) are sized from the config here.
#pragma once

#include "backend/backend.h"
#include "config/config.h"
#include "core/arena.h"
#include "model/activations.h"
#include "model/parameters.h"

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace gpt {

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
  GPT(const ModelConfig& config, int batch_size, int seq_len, Backend& backend, DType dtype = DType::F32);

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
  const ParameterTensors& params() const { return params_; }
  const ParameterTensors& grads() const { return grads_; }

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
  void backward(const StepContext& ctx);
  void zero_grads();
  // The whole gradient arena as one flat tensor (alignment gaps stay zero), and its squared L2 norm.
  Tensor gradients_flat();
  double gradient_norm_squared();

 private:
  DropoutSpec dropout(const StepContext& ctx, uint32_t layer, RngSite site) const;

  ModelConfig config_;
  Backend& backend_;
  DType dtype_;
  int max_batch_, max_seq_;
  ParameterLayout layout_;
  Arena params_arena_, grads_arena_, acts_arena_;
  ParameterTensors params_, grads_;
  ActivationTensors acts_;
  int last_B_ = 0, last_T_ = 0;
  bool last_has_dlogits_ = false;
};

}  // namespace gpt
