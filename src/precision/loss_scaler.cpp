#include "precision/loss_scaler.h"

#include "core/error.h"

#include <algorithm>
#include <cmath>

namespace gpt {

void LossScalerConfig::validate() const {
  auto finite_positive = [](double x) { return std::isfinite(x) && x > 0.0; };
  GPT_CHECK(finite_positive(initial_scale) && initial_scale <= 3.4e38, "loss_scale.initial must be finite and > 0, got {}",
            initial_scale);
  GPT_CHECK(finite_positive(growth_factor) && growth_factor > 1.0, "loss_scale.growth_factor must be > 1, got {}", growth_factor);
  GPT_CHECK(finite_positive(backoff_factor) && backoff_factor < 1.0, "loss_scale.backoff_factor must be in (0, 1), got {}",
            backoff_factor);
  GPT_CHECK(growth_interval >= 1, "loss_scale.growth_interval must be >= 1, got {}", growth_interval);
  GPT_CHECK(finite_positive(min_scale) && finite_positive(max_scale) && min_scale <= max_scale && max_scale <= 3.4e38,
            "loss_scale.min_scale {} and max_scale {} must be finite, > 0 and min <= max", min_scale, max_scale);
  GPT_CHECK(!dynamic || (initial_scale >= min_scale && initial_scale <= max_scale),
            "loss_scale.initial {} must lie in [min_scale {}, max_scale {}]", initial_scale, min_scale, max_scale);
}

LossScaler::LossScaler(const LossScalerConfig& config) : config_(config) {
  config_.validate();
  state_.scale = static_cast<float>(config_.initial_scale);
}

bool LossScaler::update(bool grads_finite) {
  if (!grads_finite) {
    ++state_.skipped_steps;
    ++state_.consecutive_skips;
    state_.good_steps = 0;
    if (config_.dynamic) {
      state_.scale = static_cast<float>(std::max(config_.min_scale, static_cast<double>(state_.scale) * config_.backoff_factor));
    }
    return false;
  }
  state_.consecutive_skips = 0;
  if (!config_.dynamic) return true;
  if (++state_.good_steps >= config_.growth_interval) {
    state_.scale = static_cast<float>(std::min(config_.max_scale, static_cast<double>(state_.scale) * config_.growth_factor));
    state_.good_steps = 0;
  }
  return true;
}

void LossScaler::load_state(const LossScalerState& state) {
  GPT_CHECK(std::isfinite(state.scale) && state.scale > 0.0f, "loss scaler state: scale {} must be finite and > 0", state.scale);
  GPT_CHECK(state.good_steps >= 0 && state.skipped_steps >= 0 && state.consecutive_skips >= 0,
            "loss scaler state: negative counters ({}, {}, {})", state.good_steps, state.skipped_steps, state.consecutive_skips);
  state_ = state;
}

}  // namespace gpt
