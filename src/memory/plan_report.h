// The table `gpt-train plan` prints: for each recompute mode, the memory of the four components and
// the extra forward FLOPs per step, marking which rows fit a budget.
#pragma once

#include "config/config.h"

#include <cstdint>
#include <optional>
#include <string>

namespace gpt {

std::string plan_report(const Config& config, std::optional<uint64_t> budget, bool keeps_probs);

}  // namespace gpt
