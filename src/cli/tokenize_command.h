// `gpt-train tokenize`: text -> token ids (space-separated, one line) or, with --decode, ids -> text.
// For users inspecting a tokenizer, and for comparing ours with other implementations.
#pragma once

#include <string>
#include <vector>

namespace gpt {

int run_tokenize_command(const std::vector<std::string>& argv);
std::string tokenize_help();

}  // namespace gpt
