#include "io/lora_adapters.h"

#include "core/error.h"
#include "io/checkpoint.h"
#include "io/crc32c.h"
#include "io/durable_file.h"
#include "io/hf_gpt2.h"
#include "io/llmc_model_file.h"
#include "io/safetensors.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <filesystem>

namespace fs = std::filesystem;

namespace gpt {
namespace {

// Tensor i of the model's adapter layout as a flat slice of parameters_to_host().
struct FlatTensor {
  std::string name;
  std::vector<int64_t> shape;
  size_t offset = 0, count = 0;
};

std::vector<FlatTensor> flat_tensors(const ParameterLayout& layout) {
  std::vector<FlatTensor> out;
  size_t offset = 0;
  for (const ArenaBuffer& b : layout.arena_layout().buffers()) {
    FlatTensor t{b.name, std::vector<int64_t>(b.shape.begin(), b.shape.begin() + b.ndim), offset, 0};
    t.count = b.bytes / dtype_size(b.dtype);
    offset += t.count;
    out.push_back(std::move(t));
  }
  return out;
}

std::string targets_text(const LoraSpec& spec) {
  std::string out;
  for (LoraTarget t : kAllLoraTargets)
    if (spec.has(t)) out += (out.empty() ? "" : ",") + std::string(lora_target_name(t));
  return out;
}

// The GPT-2 tensor that target t adapts, in the flat llm.c-order parameters.
size_t base_offset(const ParameterLayout& base, LoraTarget t) {
  size_t offset = 0;
  for (const ArenaBuffer& b : base.arena_layout().buffers()) {
    if (b.name == lora_base_weight(t)) return offset;
    offset += b.bytes / dtype_size(b.dtype);
  }
  GPT_FAIL("the GPT-2 layout has no tensor {}", lora_base_weight(t));
}

}  // namespace

LoraBase lora_base_identity(const std::string& path, std::span<const float> base) {
  return {path, crc32c(base.data(), base.size_bytes())};
}

void write_lora_adapters(const std::string& path, GPT& model, const LoraBase& base) {
  GPT_CHECK(model.lora().enabled(), "write_lora_adapters: the model has no adapters");
  const std::vector<float> flat = model.parameters_to_host();
  const std::vector<FlatTensor> tensors = flat_tensors(model.parameter_layout());
  std::vector<SafetensorsOutput> out;
  for (const FlatTensor& t : tensors) out.push_back({t.name, t.shape, std::span(flat).subspan(t.offset, t.count)});
  const LoraSpec& spec = model.lora();
  write_safetensors(path, out,
                    {{"lora_rank", std::to_string(spec.rank)}, {"lora_alpha", fmt::format("{}", spec.alpha)},
                     {"lora_targets", targets_text(spec)}, {"base_path", base.path},
                     {"base_crc32c", fmt::format("{:08x}", base.crc32c)}});
}

void read_lora_adapters(const std::string& path, GPT& model) {
  GPT_CHECK(model.lora().enabled(), "{}: holds LoRA adapters, but this run has finetune.lora.rank 0", path);
  const SafetensorsReader reader(path);
  const std::vector<FlatTensor> tensors = flat_tensors(model.parameter_layout());
  GPT_CHECK(reader.header().tensors.size() == tensors.size(),
            "{}: {} tensors, but finetune.lora (rank {}, targets {}) has {}: the adapters were trained with other "
            "finetune.lora settings",
            path, reader.header().tensors.size(), model.lora().rank, targets_text(model.lora()), tensors.size());
  std::vector<float> flat(tensors.empty() ? 0 : tensors.back().offset + tensors.back().count);
  for (const FlatTensor& t : tensors) {
    const SafetensorsEntry* e = reader.header().find(t.name);
    GPT_CHECK(e != nullptr, "{}: no tensor {}: the adapters were trained with other finetune.lora.targets", path, t.name);
    GPT_CHECK(e->shape == t.shape, "{}: tensor {} has shape [{}], finetune.lora and the model need [{}]", path, t.name,
              fmt::join(e->shape, ", "), fmt::join(t.shape, ", "));
    reader.read_f32(*e, std::span(flat).subspan(t.offset, t.count));
  }
  model.parameters_from_host(flat);
}

void write_peft_adapters(const std::string& dir, GPT& model, const std::string& base_model_name) {
  GPT_CHECK(model.lora().enabled(), "--adapters needs a LoRA run (finetune.lora.rank > 0)");
  const LoraSpec& spec = model.lora();
  const std::vector<float> flat = model.parameters_to_host();
  const std::vector<FlatTensor> tensors = flat_tensors(model.parameter_layout());
  const int L = model.config().n_layer;
  std::vector<SafetensorsOutput> out;
  nlohmann::json modules = nlohmann::json::array();
  for (LoraTarget t : kAllLoraTargets) {
    if (!spec.has(t)) continue;
    modules.push_back(lora_hf_module(t));
    for (const char* which : {"lora_a", "lora_b"}) {
      const std::string name = std::string(lora_base_weight(t)) + "." + which;
      const FlatTensor* ft = nullptr;
      for (const FlatTensor& f : tensors)
        if (f.name == name) ft = &f;
      GPT_CHECK(ft != nullptr, "the adapter layout has no {}", name);
      const size_t per_block = ft->count / static_cast<size_t>(L);
      for (int l = 0; l < L; ++l)
        out.push_back({fmt::format("base_model.model.transformer.h.{}.{}.{}.weight", l, lora_hf_module(t),
                                   which[5] == 'a' ? "lora_A" : "lora_B"),
                       {ft->shape[1], ft->shape[2]},
                       std::span(flat).subspan(ft->offset + per_block * static_cast<size_t>(l), per_block)});
    }
  }
  std::error_code ec;
  fs::create_directories(dir, ec);
  GPT_CHECK(!ec, "cannot create the export directory '{}': {}", dir, ec.message());
  write_safetensors((fs::path(dir) / "adapter_model.safetensors").string(), out, {{"format", "pt"}});
  // PEFT's LoraConfig fields. target_modules names each module by its path's ending, which PEFT matches as a
  // suffix: "attn.c_proj" and "mlp.c_proj" tell the two c_proj layers apart.
  nlohmann::json config = {{"peft_type", "LORA"},
                           {"task_type", "CAUSAL_LM"},
                           {"base_model_name_or_path", base_model_name},
                           {"r", spec.rank},
                           {"lora_alpha", spec.alpha},
                           {"lora_dropout", spec.dropout},
                           {"target_modules", modules},
                           {"fan_in_fan_out", true},
                           {"bias", "none"},
                           {"inference_mode", true},
                           {"init_lora_weights", true},
                           {"use_rslora", false},
                           {"modules_to_save", nullptr}};
  write_file_durably((fs::path(dir) / "adapter_config.json").string(), config.dump(2) + "\n");
}

std::vector<float> load_lora_checkpoint(const Config& config, const std::string& dir, GPT& model) {
  const CheckpointState state =
      parse_checkpoint_state(read_file_bytes((fs::path(dir) / "state.yaml").string()), dir + "/state.yaml");
  const auto path = state.values.find(kLoraBasePathKey), crc = state.values.find(kLoraBaseCrcKey);
  GPT_CHECK(path != state.values.end() && crc != state.values.end(), "'{}' holds LoRA adapters but not the "
            "identity of their base ({} and {} in state.yaml)", dir, kLoraBasePathKey, kLoraBaseCrcKey);
  std::vector<float> base;
  const std::string& from = config.model.init_from;
  if (from.empty()) {
    model.init_weights(config.train.seed);
    base = model.base_to_host();
  } else {
    base = is_hf_checkpoint(from) ? load_hf_gpt2(from, config.model) : read_llmc_parameters(from, llmc_header_of(config.model));
  }
  const LoraBase identity = lora_base_identity(from.empty() ? path->second : from, base);
  GPT_CHECK(fmt::format("{:08x}", identity.crc32c) == crc->second,
            "the adapters of '{}' were trained on '{}' (CRC-32C {}), but '{}' now holds other weights (CRC-32C "
            "{:08x}); put the original base back at that path (model.init_from of the run's config.yaml)",
            dir, path->second, crc->second, identity.path, identity.crc32c);
  read_lora_adapters((fs::path(dir) / kAdaptersFile).string(), model);
  return base;
}

std::vector<float> merged_parameters(std::vector<float> params, GPT& model) {
  GPT_CHECK(params.size() == static_cast<size_t>(model.num_base_parameters()), "LoRA merge: {} base values for a model of {}",
            params.size(), model.num_base_parameters());
  if (!model.lora().enabled()) return params;
  const LoraSpec& spec = model.lora();
  const std::vector<float> flat = model.parameters_to_host();
  const std::vector<FlatTensor> tensors = flat_tensors(model.parameter_layout());
  const int L = model.config().n_layer;
  size_t k = 0;
  for (LoraTarget t : kAllLoraTargets) {
    if (!spec.has(t)) continue;
    const FlatTensor &a = tensors[k], &b = tensors[k + 1];
    k += 2;
    const auto [out, in] = lora_weight_shape(t, model.config());
    const size_t w_size = static_cast<size_t>(out * in), a_size = a.count / L, b_size = b.count / L;
    const size_t base = base_offset(model.base_layout(), t);
    for (int l = 0; l < L; ++l) {
      std::vector<float> w(params.begin() + base + w_size * l, params.begin() + base + w_size * (l + 1));
      const std::vector<float> av(flat.begin() + a.offset + a_size * l, flat.begin() + a.offset + a_size * (l + 1));
      const std::vector<float> bv(flat.begin() + b.offset + b_size * l, flat.begin() + b.offset + b_size * (l + 1));
      lora_merge_into(w, av, bv, out, in, spec.rank, spec.alpha / spec.rank);
      std::copy(w.begin(), w.end(), params.begin() + base + w_size * l);
    }
  }
  return params;
}

}  // namespace gpt
