// Hugging Face GPT-2 checkpoints (transformers' GPT2LMHeadModel: model.safetensors + config.json) to and
// from our parameter layout (llm.c's order, layout/parameter_layout.h).
//
// Names, with or without the "transformer." prefix: wte.weight [V,C], wpe.weight [T,C], h.N.ln_1.{weight,bias},
// h.N.attn.c_attn.{weight [C,3C], bias}, h.N.attn.c_proj.{weight [C,C], bias}, h.N.ln_2.*,
// h.N.mlp.c_fc.{weight [C,4C], bias}, h.N.mlp.c_proj.{weight [4C,C], bias}, ln_f.*, and lm_head.weight, tied
// to wte. GPT-2's Conv1D computes y = x W + b with W [in, out]; ours is y = x W^T + b with W [out, in], so
// every matrix is transposed on the way in and out. The embedding's padded rows (V up to
// model.padded_vocab_size(), llm.c's 50257 -> 50304) are zero in the model and dropped on export.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "config/config.h"
#include "io/checkpoint_shape.h"

namespace gpt {

// A directory holding model.safetensors, or a path ending in .safetensors: what model.init_from takes as a
// Hugging Face checkpoint (anything else is an llm.c model file).
bool is_hf_checkpoint(const std::string& path);

// The weights of a Hugging Face GPT-2 checkpoint in our layout, for model (whose shape they must have).
// config.json, when it is next to the safetensors file, is checked too: n_layer, n_head, n_embd,
// n_positions, vocab_size against the model; layer_norm_epsilon 1e-5, activation gelu_new (the tanh GELU
// we compute), no untied head or other architecture variant. The attention mask buffers (attn.bias,
// attn.masked_bias) are ignored; any other unknown tensor is an error, as is a missing one.
std::vector<float> load_hf_gpt2(const std::string& path, const ModelConfig& model);

// The shape of a Hugging Face GPT-2 checkpoint from its headers alone: config.json's n_layer, n_head, n_embd,
// n_positions (or n_ctx) and vocab_size where it has them, else the safetensors header's wte [V, C], wpe [T, C]
// and number of h.N blocks. Shapes do not give the number of heads: without config.json (or without its n_head)
// n_head is missing, and missing_reason says so.
CheckpointShape read_hf_gpt2_shape(const std::string& path);

struct HfExportOptions {
  std::string dtype = "F32";  // F32, BF16 or F16
  int eot_token = 50256;      // config.json's bos_token_id / eos_token_id
};

// Writes out_dir/model.safetensors (names with the "transformer." prefix, as save_pretrained writes them,
// lm_head left out because it is tied) and out_dir/config.json for GPT2LMHeadModel.
void export_hf_gpt2(const std::string& out_dir, const ModelConfig& model, std::span<const float> params,
                    const HfExportOptions& options = {});

}  // namespace gpt
