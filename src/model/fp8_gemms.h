// The FP8 state of a model's linear layers under the fp8 recipe: one per-tensor scaling (Transformer
// Engine style, see precision/fp8_scaling.h) for each operand that is cast to FP8 -- a linear layer's
// input and weight (E4M3) and, with backward e5m2, its output gradient (E5M2) -- and the step's
// statistics of those casts (amax, values that underflowed to zero or saturated).
//
// quantize() is the cast as the GPU does it, emulated: the values an FP8 copy holds, dequantised, so the
// matrix product that follows multiplies exactly the GPU's operands. Every cast adds its input's amax
// to a running max over the step and its underflow/saturation counts to running totals, on the device;
// finish_step() reads them once per step, and with delayed scaling the caller feeds the amaxes (maximised
// over ranks) to update_scales() so every rank casts the next step with the same scales.
#pragma once

#include "backend/backend.h"
#include "core/arena.h"
#include "precision/recipe.h"

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace gpt {

enum class Fp8Linear { Qkv, AttnProj, Fc, FcProj, Count };
enum class Fp8Operand { Input, Weight, OutputGrad, Count };
const char* fp8_linear_name(Fp8Linear linear);

// Per step: each cast operand's amax, and totals over all casts.
struct Fp8StepStats {
  float scale_min = 0.0f, scale_max = 0.0f;  // over the tensors' scales used in the step
  float amax_max = 0.0f;                      // largest amax of any cast input
  int64_t values = 0;                         // values cast in the step (this rank)
  int64_t underflows = 0;                     // nonzero values cast to zero
  int64_t saturated = 0;                      // values whose scaled magnitude exceeded the format's max
};

class Fp8Gemms {
 public:
  Fp8Gemms(const PrecisionRecipe& recipe, int n_layer, Backend& backend);
  ~Fp8Gemms();
  Fp8Gemms(const Fp8Gemms&) = delete;
  Fp8Gemms& operator=(const Fp8Gemms&) = delete;

  // Whether block `layer`'s linear layers run in FP8 (not one of precision.fp8.bf16_layers).
  bool layer_uses_fp8(int layer) const { return slot_[static_cast<size_t>(layer)][0][0] >= 0; }
  bool e5m2_backward() const { return e5m2_backward_; }

  // out = the FP8 values of in (E4M3 for inputs and weights, E5M2 for output gradients), dequantised;
  // out may alias in. The layer must use FP8 (and, for OutputGrad, the backward must be e5m2).
  void quantize(const Tensor& out, const Tensor& in, int layer, Fp8Linear linear, Fp8Operand operand);

  // The step's amaxes (one per scaled tensor, in table order) and counts, read from the device; the
  // device totals restart at zero. amaxes stays valid until the next call.
  std::span<float> finish_step(Fp8StepStats& stats);
  // Forgets what casts since the last finish_step() recorded: an evaluation or sampling forward between
  // steps must not enter the next step's amax history (a resumed run would not have seen it).
  void discard_step();
  // Delayed scaling: the scales for the next step from the step's amaxes (maximised over the ranks).
  void update_scales(std::span<const float> amaxes);
  bool delayed() const { return table_.config().mode == Fp8ScalingMode::Delayed; }

  const Fp8ScalingTable& table() const { return table_; }
  Fp8ScalingTable& table() { return table_; }

 private:
  Backend& backend_;
  Fp8ScalingTable table_;
  bool e5m2_backward_;
  // slot_[layer][linear][operand]: index into table_, or -1.
  std::vector<std::array<std::array<int, static_cast<int>(Fp8Operand::Count)>, static_cast<int>(Fp8Linear::Count)>> slot_;
  std::unique_ptr<Arena> state_;  // amax [n] f32, counts [n, 2] i32, current [1] f32
  Tensor amax_, counts_, current_;
  std::vector<float> host_amax_;     // staging, sized once
  std::vector<int32_t> host_counts_;
  std::vector<int64_t> values_;      // values cast per tensor this step
};

}  // namespace gpt
