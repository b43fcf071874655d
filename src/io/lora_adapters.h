// The LoRA adapters on disk, in two layouts:
// - ours, in a checkpoint's adapters.safetensors: the adapter layout's tensors whole ("qkvw.lora_a"
//   [L, rank, in], "qkvw.lora_b" [L, out, rank], ...), FP32, with rank, alpha and the base's identity in the
//   metadata; read back exactly.
// - PEFT's (Hugging Face's parameter-efficient fine-tuning library), which `gpt-train export --adapters` writes:
//   adapter_model.safetensors with one [rank, in] lora_A and one [out, rank] lora_B per block and module,
//   named base_model.model.transformer.h.<l>.<module>.lora_{A,B}.weight (module attn.c_attn, attn.c_proj,
//   mlp.c_fc, mlp.c_proj), and adapter_config.json. GPT-2's modules are Conv1D layers whose weights are
//   stored [in, out]; PEFT keeps lora_A and lora_B in nn.Linear's [out, in] orientation for them too and
//   transposes the product instead (fan_in_fan_out: true), so ours are written as they are.
#pragma once

#include "model/gpt.h"

#include <string>
#include <vector>

namespace gpt {

inline constexpr const char* kAdaptersFile = "adapters.safetensors";

// The base weights a LoRA run adapts: where they came from (model.init_from; empty for a base drawn from
// train.seed) and the CRC-32C of their FP32 values in llm.c order as read.
struct LoraBase {
  std::string path;
  uint32_t crc32c = 0;
};
LoraBase lora_base_identity(const std::string& path, std::span<const float> base);

void write_lora_adapters(const std::string& path, GPT& model, const LoraBase& base);
// The adapters of the file into the model, after checking every tensor's name and shape against its layout.
void read_lora_adapters(const std::string& path, GPT& model);

// A LoRA checkpoint's base: the FP32 weights in llm.c order, read from config's model.init_from (or drawn from
// train.seed as the run drew them, in model's precision) and checked against the identity in the checkpoint's
// state.yaml; the checkpoint's adapters are read into model (built with config's finetune.lora).
std::vector<float> load_lora_checkpoint(const Config& config, const std::string& dir, GPT& model);

// adapter_model.safetensors and adapter_config.json in dir.
void write_peft_adapters(const std::string& dir, GPT& model, const std::string& base_model_name);

// The merged GPT-2 weights in llm.c order: base (the FP32 weights the adapters were trained on, llm.c order)
// + (alpha / rank) B A on every targeted weight, with the model's adapters.
std::vector<float> merged_parameters(std::vector<float> base, GPT& model);

}  // namespace gpt
