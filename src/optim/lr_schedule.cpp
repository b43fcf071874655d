#include "optim/lr_schedule.h"

#include <algorithm>
#include <cmath>

namespace gpt {

double learning_rate(const OptimConfig& o, int step, int total_steps) {
  if (step < o.warmup_steps) return o.lr * (step + 1) / o.warmup_steps;
  if (o.schedule == "constant") return o.lr;
  const double min_lr = o.lr * o.min_lr_ratio;
  const int decay_steps = total_steps - o.warmup_steps;
  if (decay_steps <= 1) return o.lr;
  // progress runs 0 -> 1 from the first step after warm-up to the last step.
  const double progress = std::clamp(static_cast<double>(step - o.warmup_steps) / (decay_steps - 1), 0.0, 1.0);
  if (o.schedule == "linear") return o.lr - progress * (o.lr - min_lr);
  return min_lr + 0.5 * (1.0 + std::cos(M_PI * progress)) * (o.lr - min_lr);
}

}  // namespace gpt
