// The table `gpt-train plan` prints: for each recompute mode, the memory of the four components and
// the extra forward FLOPs per step, marking which rows fit a budget; the totals include the backend's
// own workspace, and the configured row's ledger lists it on a line of its own.
#pragma once

#include "backend/backend.h"
#include "config/config.h"

#include <cstdint>
#include <optional>
#include <string>

namespace gpt {

std::string plan_report(const Config& config, std::optional<uint64_t> budget, const BackendCapabilities& backend);

}  // namespace gpt
