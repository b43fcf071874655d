// `gpt-train export RUN_OR_CHECKPOINT --format hf|llmc --out DIR`: a checkpoint's weights in the formats
// other tools load: a Hugging Face GPT-2 directory (model.safetensors, config.json, and the tokenizer files
// when the run used GPT-2's), or an llm.c model file.
#pragma once

#include <string>
#include <vector>

namespace gpt {

int run_export_command(const std::vector<std::string>& argv);
std::string export_help();

}  // namespace gpt
