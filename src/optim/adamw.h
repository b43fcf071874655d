// AdamW over the model's parameter arena: two moment arenas with the parameters' layout, and the
// per-tensor weight-decay groups (optim.no_decay exempts biases, LayerNorm and embeddings by default).
// It may also own only some ranges of the parameters (ZeRO-1: each rank updates its shard, and its
// moments hold just those elements).
#pragma once

#include "backend/backend.h"
#include "config/config.h"
#include "core/arena.h"
#include "layout/parameter_layout.h"

#include <span>
#include <vector>

namespace gpt {

// Elements [offset, offset + count) of the parameter tensor at arena index `tensor`.
struct ParamRange {
  size_t tensor = 0;
  int64_t offset = 0;
  int64_t count = 0;
  bool operator==(const ParamRange&) const = default;
};

class AdamW {
 public:
  // Updates every parameter.
  AdamW(const OptimConfig& config, const ParameterLayout& layout, Backend& backend);
  // Updates only the given disjoint ranges; the moments hold exactly their elements, in this order.
  AdamW(const OptimConfig& config, const ParameterLayout& layout, Backend& backend, std::vector<ParamRange> ranges);

  // One update with learning rate lr; grad_scale multiplies the gradients (clipping).
  void step(Arena& params, Arena& grads, double lr, double grad_scale);
  // The same update with range i's gradients in grads[i] instead of the gradient arena (a reduce-scattered
  // shard, say).
  void step(Arena& params, std::span<const Tensor> grads, double lr, double grad_scale);
  int64_t step_count() const { return step_count_; }
  // Whether the parameter tensor at arena index i is decayed.
  bool decays(size_t index) const { return decays_.at(index); }
  const std::vector<ParamRange>& ranges() const { return ranges_; }
  // Whether the ranges are every parameter tensor, whole, in layout order.
  bool owns_all() const { return owns_all_; }
  int64_t num_elements() const { return num_elements_; }
  size_t state_bytes() const { return m_.layout().total_bytes() + v_.layout().total_bytes(); }

  // Moments as flat host vectors in range order (m then v; for the whole model, layout order), for
  // checkpoints.
  std::vector<float> state_to_host();
  void state_from_host(std::span<const float> flat, int64_t step_count);

 private:
  void update(size_t i, const Tensor& params, const Tensor& grads, double lr, double grad_scale);

  OptimConfig config_;
  const ParameterLayout& layout_;
  Backend& backend_;
  std::vector<ParamRange> ranges_;
  bool owns_all_ = false;
  int64_t num_elements_ = 0;
  Arena m_, v_;  // buffer i holds range i's moments
  std::vector<bool> decays_;
  int64_t step_count_ = 0;
};

}  // namespace gpt
