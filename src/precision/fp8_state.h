// The FP8 scaling state of a model under the fp8 recipe: one Fp8Meta (scale, scale_inv, amax, underflow and
// saturation counts) per scaling slot of the precision layout, in backend memory, where the ops that
// store and read FP8 tensors use it (the tensors carry a pointer to their slot); and the host-side
// Fp8ScalingTable with the delayed-scaling amax histories, which checkpoints keep.
//
// Per step: every store into an FP8 tensor adds its amax and counts to the slot on the device;
// finish_step() reads all slots once, and with delayed scaling the caller feeds the amaxes (maximised over
// ranks) to update_scales(), which writes the next step's scales back, once. Current scaling sets a
// slot's scale on the device before each cast (fp8_current_scale), so nothing crosses to the host per
// operand; finish_step() copies those scales into the table for the statistics and checkpoints.
#pragma once

#include "backend/backend.h"
#include "core/arena.h"
#include "precision/fp8_scaling.h"
#include "precision/precision_layout.h"

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace gpt {

// Per step: each slot's amax, and totals over all stores.
struct Fp8StepStats {
  float scale_min = 0.0f, scale_max = 0.0f;  // over the slots' scales used in the step
  float amax_max = 0.0f;                      // largest amax of any stored tensor
  int64_t values = 0;                         // values stored in FP8 in the step (this rank)
  int64_t underflows = 0;                     // nonzero values stored as zero
  int64_t saturated = 0;                      // values whose scaled magnitude exceeded the format's max
};

// The backend arena of the scaling state: one Fp8Meta per scaling slot of the layout (at least one, so the
// arena is never empty). Fp8State allocates it and the memory ledger counts it (MemoryLedger::fp8_state).
ArenaLayout fp8_state_layout(const PrecisionLayout& layout);

class Fp8State {
 public:
  Fp8State(const PrecisionLayout& layout, Backend& backend);
  ~Fp8State();
  Fp8State(const Fp8State&) = delete;
  Fp8State& operator=(const Fp8State&) = delete;

  size_t slots() const { return table_.size(); }
  // The backend bytes of the state (fp8_state_layout), which the ledger plans.
  size_t device_bytes() const { return arena_->layout().total_bytes(); }
  // Slot i's state in backend memory, for Tensor::scaling.
  Fp8Meta* meta(int slot) const;
  // Adds to the values stored through a slot this step (the statistics' denominator).
  void count(const Fp8Meta* slot, int64_t values) { values_[static_cast<size_t>(slot - device_)] += values; }
  bool delayed() const { return table_.config().mode == Fp8ScalingMode::Delayed; }
  int margin() const { return table_.config().margin; }

  // The step's amaxes (one per slot) and counts, read from the device; the device totals restart at
  // zero. amaxes stays valid until the next call.
  std::span<float> finish_step(Fp8StepStats& stats);
  // Forgets what stores since the last finish_step() recorded: an evaluation or sampling forward between
  // steps must not enter the next step's amax history (a resumed run would not have seen it).
  void discard_step();
  // Delayed scaling: the scales for the next step from the step's amaxes (maximised over the ranks).
  void update_scales(std::span<const float> amaxes);

  const Fp8ScalingTable& table() const { return table_; }
  // A checkpoint's table (Fp8ScalingTable::serialize); its scales go to the device.
  void load(std::span<const uint8_t> bytes);

 private:
  void upload();

  Backend& backend_;
  Fp8ScalingTable table_;
  std::unique_ptr<Arena> arena_;  // slots() Fp8Meta
  Fp8Meta* device_ = nullptr;
  std::vector<Fp8Meta> host_;     // staging, sized once
  std::vector<float> amaxes_;
  std::vector<int64_t> values_;   // values stored per slot this step
};

}  // namespace gpt
