#include "layout/lora_layout.h"

#include "core/error.h"

#include <algorithm>

namespace gpt {
const char* lora_target_name(LoraTarget t) {
  static const char* const kNames[] = {"qkv", "attn_proj", "fc", "fc_proj"};
  return kNames[static_cast<size_t>(t)];
}

const char* lora_base_weight(LoraTarget t) {
  static const char* const kNames[] = {"qkvw", "attprojw", "fcw", "fcprojw"};
  return kNames[static_cast<size_t>(t)];
}

const char* lora_hf_module(LoraTarget t) {
  static const char* const kNames[] = {"attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj"};
  return kNames[static_cast<size_t>(t)];
}

std::array<int64_t, 2> lora_weight_shape(LoraTarget t, const ModelConfig& m) {
  const int64_t C = m.n_embd;
  switch (t) {
    case LoraTarget::Qkv: return {3 * C, C};
    case LoraTarget::AttnProj: return {C, C};
    case LoraTarget::Fc: return {4 * C, C};
    case LoraTarget::FcProj: return {C, 4 * C};
  }
  GPT_FAIL("unknown LoRA target {}", static_cast<int>(t));
}

LoraSpec LoraSpec::from_config(const FinetuneConfig& config) {
  LoraSpec spec;
  spec.rank = config.lora_rank;
  spec.alpha = config.lora_alpha;
  spec.dropout = config.lora_dropout;
  for (const std::string& name : config.lora_targets) {
    bool known = false;
    for (LoraTarget t : kAllLoraTargets)
      if (name == lora_target_name(t)) spec.targets[static_cast<size_t>(t)] = known = true;
    GPT_CHECK(known, "finetune.lora.targets: '{}' is not a target (qkv, attn_proj, fc, fc_proj)", name);
  }
  return spec;
}

ParameterLayout lora_parameter_layout(const ModelConfig& model, const LoraSpec& spec, DType dtype) {
  GPT_CHECK(spec.enabled(), "the LoRA layout needs a rank > 0");
  std::vector<ParamEntry> entries;
  const int64_t L = model.n_layer, r = spec.rank;
  for (LoraTarget t : kAllLoraTargets) {
    if (!spec.has(t)) continue;
    const auto [out, in] = lora_weight_shape(t, model);
    const std::string base = lora_base_weight(t);
    for (const auto& [suffix, shape] : {std::pair{".lora_a", std::vector<int64_t>{L, r, in}},
                                        std::pair{".lora_b", std::vector<int64_t>{L, out, r}}}) {
      ParamEntry e;
      e.spec.name = base + suffix;
      e.spec.kind = ParamKind::Matrix;
      e.shape = shape;
      entries.push_back(std::move(e));
    }
  }
  return ParameterLayout("lora_adapters", entries, dtype);
}

ArenaLayout lora_scratch_layout(const ModelConfig& model, const LoraSpec& spec, int64_t rows, DType compute,
                                DType gradient) {
  ArenaLayout layout("lora_scratch");
  layout.add("lora_h", {rows, spec.rank}, compute);
  layout.add("lora_dh", {rows, spec.rank}, compute);
  if (spec.dropout > 0.0) {
    int64_t widest = 0;
    for (LoraTarget t : kAllLoraTargets)
      if (spec.has(t)) widest = std::max(widest, lora_weight_shape(t, model)[1]);
    layout.add("lora_x", {rows, widest}, compute);
  }
  layout.add("frozen_grad_w", {model.n_embd}, gradient);
  layout.add("frozen_grad_b", {model.n_embd}, gradient);
  return layout;
}

}  // namespace gpt
