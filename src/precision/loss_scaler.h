// Loss scaling for FP16 training (Micikevicius et al., "Mixed Precision Training", 2018): the loss is
// multiplied by S before backward so small gradients stay above FP16's underflow threshold (2^-24), and
// the gradients are divided by S before clipping and the optimizer.
//
// Dynamic mode (PyTorch's GradScaler, Megatron's DynamicGradScaler): a step whose gradients hold an inf or
// NaN overflowed; it is skipped and S *= backoff_factor. After growth_interval consecutive good steps,
// S *= growth_factor. S stays within [min_scale, max_scale]. Static mode keeps S fixed, but an overflowed
// step is still skipped: applying inf/NaN gradients would destroy the FP32 master weights.
//
// Use, once per optimizer step, after the gradients of all micro-batches are complete:
//   dloss = scale() / N;                          (the loss gradient seeds backward, scaled)
//   ... backward ...
//   const bool finite = std::isfinite(grad_amax); (an amax or squared norm over all gradients)
//   if (scaler.update(finite)) optimizer step with grad_scale = scaler.inverse_scale() (times the clip factor)
// update() uses the scale the step ran with, so call scale() for the next step only after update().
#pragma once

#include <cstdint>

namespace gpt {

struct LossScalerConfig {
  double initial_scale = 65536.0;  // 2^16, PyTorch's default
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int growth_interval = 2000;      // consecutive good steps before the scale grows
  bool dynamic = true;             // false: static loss scaling at initial_scale
  double min_scale = 1.0;
  double max_scale = 16777216.0;   // 2^24

  // Throws gpt::Error naming the field when a value is impossible.
  void validate() const;
};

// Everything a checkpoint needs to continue the scaler where it was.
struct LossScalerState {
  float scale = 65536.0f;
  int64_t good_steps = 0;          // consecutive finite steps since the last growth or backoff
  int64_t skipped_steps = 0;       // overflowed steps over the whole run (a metric)
  int64_t consecutive_skips = 0;   // overflowed steps in a row: a run stuck at min_scale has diverged

  bool operator==(const LossScalerState&) const = default;
};

class LossScaler {
 public:
  explicit LossScaler(const LossScalerConfig& config = {});

  const LossScalerConfig& config() const { return config_; }
  // The factor the loss (its gradient) is multiplied by this step, and its reciprocal for the gradients.
  float scale() const { return state_.scale; }
  float inverse_scale() const { return 1.0f / state_.scale; }

  // Ends a step: grads_finite says whether every gradient was finite. Returns whether the optimizer
  // should apply the step (false: skip it; the gradients are discarded).
  bool update(bool grads_finite);

  const LossScalerState& state() const { return state_; }
  // Restores a checkpointed state; the scale must be finite and > 0.
  void load_state(const LossScalerState& state);

 private:
  LossScalerConfig config_;
  LossScalerState state_;
};

}  // namespace gpt
