// `gpt-train plan --levers` as text and, with --json, as JSON: the same LeverTable, so the two carry the same
// numbers (the text rounds them to format_bytes).
#pragma once

#include "backend/backend.h"
#include "memory/levers.h"

#include <nlohmann/json.hpp>

#include <string>

namespace gpt {

std::string lever_report(const LeverTable& table, const BackendCapabilities& backend);
nlohmann::ordered_json lever_report_json(const LeverTable& table, const BackendCapabilities& backend);

}  // namespace gpt
