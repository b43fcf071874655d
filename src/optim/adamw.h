// AdamW over the model's parameter arena: two moment arenas with the parameters' layout, and the
// per-tensor weight-decay groups (optim.no_decay exempts biases, LayerNorm and embeddings by default).
// It may also own only some ranges of the parameters (ZeRO-1: each rank updates its shard, and its
// moments hold just those elements).
//
// Offload (memory.offload: optimizer). Given a host backend, the FP32 masters of the owned ranges, a host
// copy of their gradients and the moments live in that backend's memory, and the update runs there (the CPU
// backend's AdamW, threaded): per range, the gradients come over to the host (unless stage_gradients already
// brought them during backward), AdamW updates the host masters, and the result is written back into the
// device's weights, which the next forward reads (or casts its compute copy from). The arithmetic is the
// host backend's AdamW on the same values, so on the CPU backend an offloaded run is the same run bit for
// bit. The masters are taken from the device's weights at the first update after construction or after
// state_from_host (a resume), since initialisation, loading and the data-parallel broadcast write those.
#pragma once

#include "backend/backend.h"
#include "config/config.h"
#include "core/arena.h"
#include "layout/parameter_layout.h"

#include <memory>
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
  // Offloaded to `host` (which must outlive this), the ranges' gradients read from device tensors of grad_dtype.
  AdamW(const OptimConfig& config, const ParameterLayout& layout, Backend& backend, std::vector<ParamRange> ranges,
        Backend& host, DType grad_dtype);

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

  // Offload: whether the state lives on a host backend; the bytes of its host masters and gradient copy.
  bool offloaded() const { return host_ != nullptr; }
  size_t host_master_bytes() const { return host_masters_ ? host_masters_->layout().total_bytes() : 0; }
  size_t host_gradient_bytes() const { return host_grads_ ? host_grads_->layout().total_bytes() : 0; }
  // Offload, one rank owning every tensor whole: copies block `block`'s gradients ([0, L), or -1 for the
  // embeddings and final LayerNorm) to the host as soon as backward has made them final (GPT::backward's
  // hook in the last micro-batch), so that the update need not wait for them. Without offload, nothing.
  void stage_gradients(int block, Arena& grads);
  // Forgets what stage_gradients brought over (a step that is not applied leaves it stale).
  void forget_staged_gradients();
  // Offload: milliseconds the last update spent on the host side (gradient copies, AdamW, the write-back).
  double last_host_ms() const { return last_host_ms_; }

  // Moments as flat host vectors in range order (m then v; for the whole model, layout order), for
  // checkpoints.
  std::vector<float> state_to_host();
  void state_from_host(std::span<const float> flat, int64_t step_count);

 private:
  AdamW(const OptimConfig& config, const ParameterLayout& layout, Backend& backend, std::vector<ParamRange> ranges,
        Backend* host, DType grad_dtype);
  void update(size_t i, const Tensor& params, const Tensor& grads, double lr, double grad_scale);
  // Range i's elements in the parameter (or gradient) arena.
  Tensor range_view(Arena& arena, size_t i);
  // The update of every range, given range i's device gradients.
  template <class Grads>
  void update_all(Arena& params, const Grads& grads_of, double lr, double grad_scale);
  // The offloaded update of range i, whose device weights and gradients are these views.
  void host_update(size_t i, const Tensor& params, const Tensor& grads, double lr, double grad_scale);
  Backend& state_backend() { return host_ != nullptr ? *host_ : backend_; }

  OptimConfig config_;
  const ParameterLayout& layout_;
  Backend& backend_;
  std::vector<ParamRange> ranges_;
  bool owns_all_ = false;
  int64_t num_elements_ = 0;
  Backend* host_ = nullptr;  // offload: the backend whose memory holds the state and which runs the update
  Arena m_, v_;  // buffer i holds range i's moments
  std::vector<bool> decays_;
  int64_t step_count_ = 0;
  // Offload: buffer i of each holds range i's masters and its gradients' host copy; staged_blocks_[i] counts
  // the slices of range i stage_gradients has copied this step (a tensor outside the blocks has one).
  std::unique_ptr<Arena> host_masters_, host_grads_;
  std::vector<int> staged_blocks_;
  bool masters_loaded_ = false;
  double last_host_ms_ = 0.0;
};

}  // namespace gpt
