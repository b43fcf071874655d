// Learning-rate schedule: linear warm-up, then cosine or linear decay to lr * min_lr_ratio, or constant.
#pragma once

#include "config/config.h"

namespace gpt {

// Learning rate of optimizer step `step` (0-based) of `total_steps`.
double learning_rate(const OptimConfig& optim, int step, int total_steps);

}  // namespace gpt
