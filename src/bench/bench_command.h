// gpt-train bench CONFIG: times training steps of the configured model and says how close they come to
// the machine's matrix-product peak (model FLOPs utilisation) and where the time goes, op by op.
#pragma once

#include <string>
#include <vector>

namespace gpt::bench {

int run_bench_command(const std::vector<std::string>& args);
std::string bench_help();

}  // namespace gpt::bench
