// AdamW over the model's parameter arena: two moment arenas with the parameters' layout, and the
// per-tensor weight-decay groups (optim.no_decay exempts biases, LayerNorm and embeddings by default).
// It may also own only some ranges of the parameters (ZeRO-1: each rank updates its shard, and its
// moments hold just those elements).
//
// Offload (memory.offload: optimizer). Given a host backend, the FP32 masters of the owned ranges, a host
// copy of their gradients and the moments live in that backend's memory, and the update runs there (the CPU
// backend's AdamW, threaded). The masters and the gradients' copy, which cross the bus, are in the device
// backend's pinned memory where it has some (core/arena.h, pin_through). The update goes unit by unit in the order the
// gradients become final: owning every tensor whole, one unit per block from L-1 down to 0 (that block's
// slice of each per-block tensor), then the embeddings with the final LayerNorm; over a shard (ZeRO-1),
// one unit per range. A unit's gradients come over on the device's copy stream (queued by stage_gradients
// as backward finishes the block, or, for a unit not staged, all at the start of the update), AdamW
// updates its host masters once they have landed, and its weights go back to the device on the copy stream
// while the next unit updates; ops queued after the update (the next forward) wait for the last of them on
// the device. What overlaps with what:
//   - a block's gradient copy with the backward of the blocks below it, the norm and the earlier units'
//     AdamW (its source is final and nothing writes it before the next step's zero_grads);
//   - a unit's weight copy back with the AdamW of the units after it;
//   - not AdamW with backward: the update needs the clip scale and the non-finite verdict, which need the
//     norm over every gradient (see step_runner.h), so the first unit starts once backward and the norm
//     are done. (An update that started earlier would have to be undone for a skipped step, or would
//     change the clip scale's bits; ZeRO-Offload's remedy, a one-step-delayed update, changes the run.)
// On a backend whose device memory is the host's (the CPU), the transfers are plain copies done at once,
// so the same code path runs in the same order. The arithmetic is the host backend's AdamW on the same
// values, elementwise, so cutting a tensor into units changes no bit: on the CPU backend an offloaded run
// is the same run bit for bit. The masters are taken from the device's weights at the first update after
// construction or after state_from_host (a resume), since initialisation, loading and the data-parallel
// broadcast write those.
// Where the model keeps its FP32 masters in host memory itself (GPT's masters_host: a narrow recipe), the
// parameter arena the update is given is those masters: AdamW updates them (or its shard's ranges of them)
// in place, keeps no copy and sends nothing back itself. Owning every tensor whole, as each unit is done it
// calls the hook set by on_masters_updated, through which the model sends that block's compute copy, which
// the update wrote into its host twin (write_compute_copy), while the next units update; over a shard the
// data-parallel all-gather brings the other ranks' ranges in first, so the hook is not called.
#pragma once

#include "backend/backend.h"
#include "config/config.h"
#include "core/arena.h"
#include "layout/parameter_layout.h"

#include <functional>
#include <memory>
#include <span>
#include <vector>

namespace gpt {

// Offload: where the FP32 masters the update writes are. HostCopy: AdamW's own copy in host memory of the
// device's weights, sent back after each unit's update. InParameters: the parameter arena itself, which is
// in host memory (a model built with masters_host).
enum class OffloadMasters { HostCopy, InParameters };

// Elements [offset, offset + count) of the parameter tensor at arena index `tensor`.
struct ParamRange {
  size_t tensor = 0;
  int64_t offset = 0;
  int64_t count = 0;
  bool operator==(const ParamRange&) const = default;
};

// Every parameter tensor of layout whole, in arena order: what an optimizer owning all of them updates.
std::vector<ParamRange> whole_tensors(const ParameterLayout& layout);

class AdamW {
 public:
  // Updates every parameter.
  AdamW(const OptimConfig& config, const ParameterLayout& layout, Backend& backend);
  // Updates only the given disjoint ranges; the moments hold exactly their elements, in this order.
  AdamW(const OptimConfig& config, const ParameterLayout& layout, Backend& backend, std::vector<ParamRange> ranges);
  // Offloaded to `host` (which must outlive this), the ranges' gradients read from device tensors of grad_dtype.
  AdamW(const OptimConfig& config, const ParameterLayout& layout, Backend& backend, std::vector<ParamRange> ranges,
        Backend& host, DType grad_dtype, OffloadMasters masters = OffloadMasters::HostCopy);

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

  // The update also writes the weights' compute copy: each slice's masters, once updated, go into its
  // BF16/F16 `copy` too (AdamWArgs::compute), with the bits a cast would give, so the next forward need
  // not cast them. For an optimizer that owns every tensor whole (no shard): on the device, or offloaded
  // with the masters in the parameter arena, where the copy is in the state backend's memory (the model's
  // host twin of it, which the hook set by on_masters_updated sends on) and each unit's piece of a tensor
  // must be one slice. The slices must tile each tensor in order.
  void write_compute_copy(std::vector<ComputeCopySlice> slices);
  bool writes_compute_copy() const { return !compute_slices_.empty(); }

  // Offload: whether the state lives on a host backend; the bytes of its host masters (0 with the masters
  // in the parameter arena) and gradient copy; whether the gradient copy, and the masters' copy where it
  // keeps one, are in the device backend's pinned memory.
  bool offloaded() const { return host_ != nullptr; }
  bool masters_in_parameters() const { return masters_in_parameters_; }
  bool host_memory_pinned() const {
    return host_grads_ && host_grads_->pinned() && (!host_masters_ || host_masters_->pinned());
  }
  size_t host_master_bytes() const { return host_masters_ ? host_masters_->layout().total_bytes() : 0; }
  size_t host_gradient_bytes() const { return host_grads_ ? host_grads_->layout().total_bytes() : 0; }
  // Offload, one rank owning every tensor whole: queues the copy of block `block`'s gradients ([0, L), or
  // -1 for the embeddings and final LayerNorm) to the host as soon as backward has made them final
  // (GPT::backward's hook in the last micro-batch), so that they land during the rest of backward. Without
  // offload, nothing.
  void stage_gradients(int block, Arena& grads);
  // Forgets what stage_gradients brought over (a step that is not applied leaves it stale), once it landed.
  void forget_staged_gradients();
  // Offload with the masters in the parameter arena, owning every tensor whole: `hook(block)` runs once the
  // update has written block `block`'s masters ([0, L), or -1 for the embeddings and final LayerNorm), in the update's order.
  void on_masters_updated(std::function<void(int block)> hook) { masters_updated_ = std::move(hook); }
  // Offload: milliseconds the last update spent on the host (waiting for gradients, AdamW, queueing the
  // weights' copies back), from its start, when the device has finished the norm, until the next forward
  // may be queued: the device has no compute queued meanwhile. And the part of it AdamW itself took.
  double last_host_ms() const { return last_host_ms_; }
  double last_adamw_ms() const { return last_adamw_ms_; }
  // Offload: the update's units in the order it runs them; unit u's pieces are (range, offset, count),
  // elements [offset, offset + count) of range `range`.
  struct Piece {
    size_t range = 0;
    int64_t offset = 0, count = 0;
    int64_t compute_slice = -1;  // the write_compute_copy slice the update writes it into; -1: none
  };
  int num_units() const { return static_cast<int>(units_.size()); }
  const std::vector<Piece>& unit_pieces(int u) const { return units_.at(static_cast<size_t>(u)).pieces; }

  // Moments as flat host vectors in range order (m then v; for the whole model, layout order), for
  // checkpoints.
  std::vector<float> state_to_host();
  void state_from_host(std::span<const float> flat, int64_t step_count);

 private:
  AdamW(const OptimConfig& config, const ParameterLayout& layout, Backend& backend, std::vector<ParamRange> ranges,
        Backend* host, DType grad_dtype, OffloadMasters masters);
  // AdamW over elements [offset, offset + params.numel()) of range i, whose weights and gradients these are,
  // writing the updated weights into `compute` too where it is given.
  void update(size_t i, int64_t offset, const Tensor& params, const Tensor& grads, double lr, double grad_scale,
              const Tensor& compute = {});
  // Range i's elements in the parameter (or gradient) arena.
  Tensor range_view(Arena& arena, size_t i);
  // The update of every range, given range i's device gradients.
  template <class Grads>
  void update_all(Arena& params, const Grads& grads_of, double lr, double grad_scale);
  // The offloaded update, given range i's device gradients.
  template <class Grads>
  void host_update_all(Arena& params, const Grads& grads_of, double lr, double grad_scale);
  // Offload: the units (one per block and one for the rest, or one per range), and the unit of a block.
  void plan_units();
  size_t unit_of_block(int block) const;
  // Queues the copy of unit u's gradients from the device views range_grads(i) and returns its ticket.
  template <class Grads>
  uint64_t queue_gradients(size_t u, const Grads& range_grads);
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
  // Offload: buffer i of each holds range i's masters and its gradients' host copy. A unit's gradients are
  // `staged` once stage_gradients queued their copy this step, whose ticket is `landed`.
  struct Unit {
    std::vector<Piece> pieces;
    uint64_t landed = 0;
    bool staged = false;
  };
  std::unique_ptr<Arena> host_masters_, host_grads_;  // host_masters_ null with masters_in_parameters_
  bool masters_in_parameters_ = false;
  std::function<void(int)> masters_updated_;
  std::vector<Unit> units_;
  int blocks_ = 0;  // L, when owning every tensor whole
  std::vector<ComputeCopySlice> compute_slices_;  // write_compute_copy's; empty: the update writes no copy
  bool masters_loaded_ = false;
  double last_host_ms_ = 0.0, last_adamw_ms_ = 0.0;
};

}  // namespace gpt
