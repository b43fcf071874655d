// `gpt-train report RUN_DIR [RUN_DIR ...]`: one picture (PNG and SVG) of one or more runs.
#pragma once

#include <string>
#include <vector>

namespace gpt {

int run_report_command(const std::vector<std::string>& argv);
std::string report_help();

}  // namespace gpt
