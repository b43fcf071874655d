#include "train/step_eta.h"

#include <numeric>

namespace gpt {

void StepEta::add_step_ms(double ms) {
  recent_ms_.push_back(ms);
  if (recent_ms_.size() > window_) recent_ms_.pop_front();
  // Summed afresh over the window (at most a few dozen values) so no rounding drifts in over a long run.
  sum_ms_ = std::accumulate(recent_ms_.begin(), recent_ms_.end(), 0.0);
}

double StepEta::seconds_left(int64_t remaining) const {
  if (recent_ms_.empty() || remaining <= 0) return 0.0;
  return sum_ms_ / 1000.0 / static_cast<double>(recent_ms_.size()) * static_cast<double>(remaining);
}

}  // namespace gpt
