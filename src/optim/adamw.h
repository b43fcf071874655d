// AdamW over the model's parameter arena: two moment arenas with the parameters' layout, and the
// per-tensor weight-decay groups (optim.no_decay exempts biases, LayerNorm and embeddings by default).
#pragma once

#include "backend/backend.h"
#include "config/config.h"
#include "core/arena.h"
#include "model/parameters.h"

#include <span>
#include <vector>

namespace gpt {

class AdamW {
 public:
  AdamW(const OptimConfig& config, const ParameterLayout& layout, Backend& backend);

  // One update with learning rate lr; grad_scale multiplies the gradients (clipping).
  void step(Arena& params, Arena& grads, double lr, double grad_scale);
  int64_t step_count() const { return step_count_; }
  // Whether the parameter tensor at arena index i is decayed.
  bool decays(size_t index) const { return decays_.at(index); }

  // Moments as flat host vectors in layout order (m then v), for checkpoints.
  std::vector<float> state_to_host();
  void state_from_host(std::span<const float> flat, int64_t step_count);

 private:
  OptimConfig config_;
  const ParameterLayout& layout_;
  Backend& backend_;
  Arena m_, v_;
  std::vector<bool> decays_;
  int64_t step_count_ = 0;
};

}  // namespace gpt
