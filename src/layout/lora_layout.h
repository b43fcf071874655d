// The LoRA adapters' sizes, below the model and the memory planner, which both read them: which layers
// get adapters, the adapters' parameter layout, and the scratch their products use (model/lora.h has the math).
#pragma once

#include "config/config.h"
#include "core/arena.h"
#include "layout/parameter_layout.h"

#include <array>
#include <cstdint>

namespace gpt {

enum class LoraTarget { Qkv, AttnProj, Fc, FcProj };
inline constexpr int kLoraTargets = 4;
inline constexpr LoraTarget kAllLoraTargets[] = {LoraTarget::Qkv, LoraTarget::AttnProj, LoraTarget::Fc, LoraTarget::FcProj};

// The config's name (qkv, attn_proj, fc, fc_proj), the base weight it adapts (qkvw, attprojw, fcw,
// fcprojw), and the Hugging Face GPT-2 module (attn.c_attn, attn.c_proj, mlp.c_fc, mlp.c_proj).
const char* lora_target_name(LoraTarget t);
const char* lora_base_weight(LoraTarget t);
const char* lora_hf_module(LoraTarget t);
// {out, in} of the adapted weight.
std::array<int64_t, 2> lora_weight_shape(LoraTarget t, const ModelConfig& model);

struct LoraSpec {
  int rank = 0;
  double alpha = 16.0;
  double dropout = 0.0;
  std::array<bool, kLoraTargets> targets{};

  bool enabled() const { return rank > 0; }
  bool has(LoraTarget t) const { return targets[static_cast<size_t>(t)]; }
  float scale() const { return static_cast<float>(alpha / rank); }
  static LoraSpec from_config(const FinetuneConfig& config);
};

// The adapters as a parameter layout, target by target in LoraTarget order: "<base>.lora_a" [L, rank, in]
// and "<base>.lora_b" [L, out, rank], both ParamKind::Matrix (decayed as matrices are). AdamW, the
// gradient reduction and clipping run over it as over the full model's layout.
ParameterLayout lora_parameter_layout(const ModelConfig& model, const LoraSpec& spec, DType dtype);

// Scratch the adapters' products need for a micro-batch of `rows` tokens: "lora_h" and "lora_dh" [rows, rank]
// and, with dropout, "lora_x" [rows, widest input] for the dropped input (and, backward, dh A before its mask),
// in the compute format; and "frozen_grad_w", "frozen_grad_b" [n_embd] in the gradient format, where the
// LayerNorm backward op accumulates the frozen gains' and biases' gradients that nothing reads.
ArenaLayout lora_scratch_layout(const ModelConfig& model, const LoraSpec& spec, int64_t rows, DType compute,
                                DType gradient);

}  // namespace gpt
