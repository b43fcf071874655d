#include "io/hf_gpt2.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <charconv>
#include <climits>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>

#include "core/error.h"
#include "io/durable_file.h"
#include "io/safetensors.h"

namespace gpt {

namespace fs = std::filesystem;

namespace {

constexpr const char* kWeightsFile = "model.safetensors";
constexpr const char* kConfigFile = "config.json";

// Offsets of the parameter tensors in the flat llm.c-order vector.
struct Layout {
  int64_t L, C, V, Vp, T;
  size_t wte, wpe, ln1w, ln1b, qkvw, qkvb, attprojw, attprojb, ln2w, ln2b, fcw, fcb, fcprojw, fcprojb, lnfw, lnfb, total;

  explicit Layout(const ModelConfig& m)
      : L(m.n_layer), C(m.n_embd), V(m.vocab_size), Vp(m.padded_vocab_size()), T(m.context_length) {
    size_t at = 0;
    const auto next = [&](int64_t n) {
      const size_t here = at;
      at += static_cast<size_t>(n);
      return here;
    };
    wte = next(Vp * C);
    wpe = next(T * C);
    ln1w = next(L * C);
    ln1b = next(L * C);
    qkvw = next(L * 3 * C * C);
    qkvb = next(L * 3 * C);
    attprojw = next(L * C * C);
    attprojb = next(L * C);
    ln2w = next(L * C);
    ln2b = next(L * C);
    fcw = next(L * 4 * C * C);
    fcb = next(L * 4 * C);
    fcprojw = next(L * C * 4 * C);
    fcprojb = next(L * C);
    lnfw = next(C);
    lnfb = next(C);
    total = at;
  }
};

// src [rows, cols] -> dst [cols, rows].
void transpose(const float* src, int64_t rows, int64_t cols, float* dst) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) dst[c * rows + r] = src[r * cols + c];
}

std::string shape_str(const std::vector<int64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

fs::path weights_path(const std::string& path) {
  return fs::is_directory(path) ? fs::path(path) / kWeightsFile : fs::path(path);
}

nlohmann::json read_json_object(const fs::path& path) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(read_file_bytes(path.string()));
  } catch (const nlohmann::json::parse_error& e) {
    GPT_FAIL("{}: not valid JSON at byte offset {}: {}", path.string(), e.byte > 0 ? e.byte - 1 : 0, e.what());
  } catch (const nlohmann::json::exception& e) {
    // What parses but cannot be held, e.g. a number beyond a double's range (out_of_range.406).
    GPT_FAIL("{}: not valid JSON: {}", path.string(), e.what());
  }
  GPT_CHECK(j.is_object(), "{}: expected a JSON object", path.string());
  return j;
}

// config.json's keys for the model's shape keys, as (ours, theirs, the older name transformers also reads).
constexpr std::array<std::array<const char*, 3>, 5> kHfShapeKeys = {{{"n_layer", "n_layer", nullptr},
                                                                     {"n_head", "n_head", nullptr},
                                                                     {"n_embd", "n_embd", nullptr},
                                                                     {"context_length", "n_positions", "n_ctx"},
                                                                     {"vocab_size", "vocab_size", nullptr}}};

// config.json against the model: every difference in one message, with the keys to set.
void check_hf_config(const fs::path& path, const ModelConfig& m) {
  const nlohmann::json j = read_json_object(path);
  std::vector<std::string> problems;
  const auto int_key = [&](const char* key, const char* fallback, int ours, const char* our_key) {
    const char* k = j.contains(key) ? key : fallback;
    if (k == nullptr || !j.contains(k)) return;
    if (!j[k].is_number_integer() || j[k].get<int64_t>() != ours)
      problems.push_back(fmt::format("{} is {} but model.{} is {}", k, j[k].dump(), our_key, ours));
  };
  const std::map<std::string, int> model_values = {{"n_layer", m.n_layer}, {"n_head", m.n_head}, {"n_embd", m.n_embd},
                                                   {"context_length", m.context_length},
                                                   {"vocab_size", m.vocab_size}};
  for (const auto& [our_key, key, fallback] : kHfShapeKeys) int_key(key, fallback, model_values.at(our_key), our_key);
  if (j.contains("model_type") && j["model_type"] != "gpt2")
    problems.push_back(fmt::format("model_type is {}, not \"gpt2\"", j["model_type"].dump()));
  if (j.contains("layer_norm_epsilon") &&
      (!j["layer_norm_epsilon"].is_number() || std::abs(j["layer_norm_epsilon"].get<double>() - 1e-5) > 1e-12))
    problems.push_back(fmt::format("layer_norm_epsilon is {}; gpt-train's LayerNorm uses 1e-5",
                                   j["layer_norm_epsilon"].dump()));
  if (j.contains("activation_function") && j["activation_function"] != "gelu_new" &&
      j["activation_function"] != "gelu_pytorch_tanh")
    problems.push_back(fmt::format("activation_function is {}; gpt-train computes the tanh GELU (gelu_new)",
                                   j["activation_function"].dump()));
  if (j.contains("n_inner") && !j["n_inner"].is_null() && j["n_inner"] != 4 * m.n_embd)
    problems.push_back(fmt::format("n_inner is {}; gpt-train's MLP has 4 n_embd = {} channels", j["n_inner"].dump(),
                                   4 * m.n_embd));
  for (const char* key : {"scale_attn_by_inverse_layer_idx", "reorder_and_upcast_attn"})
    if (j.contains(key) && j[key] == true) problems.push_back(fmt::format("{} is true; gpt-train does not do that", key));
  for (const char* key : {"tie_word_embeddings", "scale_attn_weights"})
    if (j.contains(key) && j[key] == false)
      problems.push_back(fmt::format("{} is false; gpt-train's GPT-2 needs it true", key));
  GPT_CHECK(problems.empty(), "{} does not describe this model: {}", path.string(), fmt::join(problems, "; "));
}

}  // namespace

bool is_hf_checkpoint(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) return true;
  return fs::path(path).extension() == ".safetensors";
}

std::vector<float> load_hf_gpt2(const std::string& path, const ModelConfig& m) {
  const fs::path file = weights_path(path);
  GPT_CHECK(fs::exists(file), "Hugging Face checkpoint: {} does not exist", file.string());
  const fs::path config = file.parent_path() / kConfigFile;
  if (fs::exists(config)) check_hf_config(config, m);
  const SafetensorsReader reader(file.string());
  const SafetensorsHeader& h = reader.header();
  const std::string prefix = h.find("transformer.wte.weight") != nullptr ? "transformer." : "";
  GPT_CHECK(h.find(prefix + "wte.weight") != nullptr,
            "{}: no tensor wte.weight or transformer.wte.weight: not a GPT-2 checkpoint", file.string());

  const Layout lay(m);
  const int64_t C = lay.C;
  std::vector<float> params(lay.total, 0.0f);
  std::set<std::string> used;
  const auto read = [&](const std::string& name, std::vector<int64_t> shape) {
    const std::string full = prefix + name;
    const SafetensorsEntry* e = h.find(full);
    GPT_CHECK(e != nullptr, "{}: tensor '{}' is missing", file.string(), full);
    GPT_CHECK(e->shape == shape, "{}: tensor '{}' has shape {}, but this model (model.*) needs {}", file.string(), full,
              shape_str(e->shape), shape_str(shape));
    std::vector<float> out(e->numel());
    reader.read_f32(*e, out);
    used.insert(full);
    return out;
  };
  const auto copy = [&](const std::vector<float>& src, size_t at) { std::copy(src.begin(), src.end(), params.begin() + static_cast<std::ptrdiff_t>(at)); };

  const std::vector<float> wte = read("wte.weight", {lay.V, C});
  copy(wte, lay.wte);
  copy(read("wpe.weight", {lay.T, C}), lay.wpe);
  for (int64_t l = 0; l < lay.L; ++l) {
    const std::string b = fmt::format("h.{}.", l);
    const auto u = static_cast<size_t>(l);
    const auto Cs = static_cast<size_t>(C);
    copy(read(b + "ln_1.weight", {C}), lay.ln1w + u * Cs);
    copy(read(b + "ln_1.bias", {C}), lay.ln1b + u * Cs);
    transpose(read(b + "attn.c_attn.weight", {C, 3 * C}).data(), C, 3 * C, &params[lay.qkvw + u * 3 * Cs * Cs]);
    copy(read(b + "attn.c_attn.bias", {3 * C}), lay.qkvb + u * 3 * Cs);
    transpose(read(b + "attn.c_proj.weight", {C, C}).data(), C, C, &params[lay.attprojw + u * Cs * Cs]);
    copy(read(b + "attn.c_proj.bias", {C}), lay.attprojb + u * Cs);
    copy(read(b + "ln_2.weight", {C}), lay.ln2w + u * Cs);
    copy(read(b + "ln_2.bias", {C}), lay.ln2b + u * Cs);
    transpose(read(b + "mlp.c_fc.weight", {C, 4 * C}).data(), C, 4 * C, &params[lay.fcw + u * 4 * Cs * Cs]);
    copy(read(b + "mlp.c_fc.bias", {4 * C}), lay.fcb + u * 4 * Cs);
    transpose(read(b + "mlp.c_proj.weight", {4 * C, C}).data(), 4 * C, C, &params[lay.fcprojw + u * 4 * Cs * Cs]);
    copy(read(b + "mlp.c_proj.bias", {C}), lay.fcprojb + u * Cs);
  }
  copy(read("ln_f.weight", {C}), lay.lnfw);
  copy(read("ln_f.bias", {C}), lay.lnfb);

  if (const SafetensorsEntry* head = h.find("lm_head.weight"); head != nullptr) {
    GPT_CHECK(head->shape == std::vector<int64_t>({lay.V, C}), "{}: lm_head.weight has shape {}, expected {}",
              file.string(), shape_str(head->shape), shape_str({lay.V, C}));
    std::vector<float> lm(head->numel());
    reader.read_f32(*head, lm);
    GPT_CHECK(lm == wte, "{}: lm_head.weight differs from {}wte.weight; gpt-train's LM head is tied to the token "
              "embedding", file.string(), prefix);
    used.insert("lm_head.weight");
  }
  std::vector<std::string> unknown;
  for (const SafetensorsEntry& e : h.tensors)
    if (!used.contains(e.name) && !e.name.ends_with(".attn.bias") && !e.name.ends_with(".attn.masked_bias"))
      unknown.push_back(e.name);
  GPT_CHECK(unknown.empty(), "{}: {} tensor(s) that are not part of a {}-layer GPT-2: {}", file.string(),
            unknown.size(), lay.L, fmt::join(unknown.begin(), unknown.begin() + std::min<size_t>(unknown.size(), 8), ", "));
  return params;
}

CheckpointShape read_hf_gpt2_shape(const std::string& path) {
  const fs::path file = weights_path(path);
  GPT_CHECK(fs::exists(file), "Hugging Face checkpoint: {} does not exist", file.string());
  const SafetensorsReader reader(file.string());  // reads the header, not the data section
  const SafetensorsHeader& h = reader.header();
  const std::string prefix = h.find("transformer.wte.weight") != nullptr ? "transformer." : "";
  CheckpointShape shape;
  const auto set = [&](const std::string& key, int64_t value, std::string source) {
    GPT_CHECK(value > 0 && value <= INT_MAX, "{}: {} is {}, expected a positive integer below 2^31", file.string(),
              source, value);
    std::erase_if(shape.values, [&](const CheckpointShapeValue& v) { return v.key == key; });
    shape.values.push_back({key, static_cast<int>(value), std::move(source)});
  };
  const auto matrix = [&](const std::string& name) {
    const SafetensorsEntry* e = h.find(prefix + name);
    GPT_CHECK(e != nullptr && e->shape.size() == 2, "{}: no 2-D tensor {}{}: not a GPT-2 checkpoint", file.string(),
              prefix, name);
    return e;
  };
  const SafetensorsEntry* wte = matrix("wte.weight");
  const SafetensorsEntry* wpe = matrix("wpe.weight");
  const std::string at = fmt::format("{}: ", file.string());
  set("vocab_size", wte->shape[0], fmt::format("{}{} {}", at, wte->name, shape_str(wte->shape)));
  set("n_embd", wte->shape[1], fmt::format("{}{} {}", at, wte->name, shape_str(wte->shape)));
  set("context_length", wpe->shape[0], fmt::format("{}{} {}", at, wpe->name, shape_str(wpe->shape)));
  int64_t layers = 0;
  for (const SafetensorsEntry& e : h.tensors) {
    if (!e.name.starts_with(prefix + "h.")) continue;
    const char* digits = e.name.data() + prefix.size() + 2;
    int64_t block = 0;
    const auto [end, ec] = std::from_chars(digits, e.name.data() + e.name.size(), block);
    if (ec == std::errc() && *end == '.' && block < INT_MAX) layers = std::max(layers, block + 1);
  }
  GPT_CHECK(layers > 0, "{}: no {}h.N tensors: not a GPT-2 checkpoint", file.string(), prefix);
  set("n_layer", layers, fmt::format("{}blocks {}h.0 to {}h.{}", at, prefix, prefix, layers - 1));

  const fs::path config = file.parent_path() / kConfigFile;
  if (!fs::exists(config)) {
    shape.missing_reason = fmt::format("{} has no {} beside it, and tensor shapes do not give the number of heads",
                                       file.string(), kConfigFile);
    return shape;
  }
  const nlohmann::json j = read_json_object(config);
  for (const auto& [our_key, key, fallback] : kHfShapeKeys) {
    const char* k = j.contains(key) ? key : fallback;
    if (k == nullptr || !j.contains(k)) continue;
    GPT_CHECK(j[k].is_number_integer(), "{}: {} is {}, expected an integer", config.string(), k, j[k].dump());
    set(our_key, j[k].get<int64_t>(), fmt::format("{}: {}", config.string(), k));
  }
  if (shape.find("n_head") == nullptr)
    shape.missing_reason = fmt::format("{} has no n_head, and tensor shapes do not give the number of heads",
                                       config.string());
  return shape;
}

void export_hf_gpt2(const std::string& out_dir, const ModelConfig& m, std::span<const float> params,
                    const HfExportOptions& options) {
  const Layout lay(m);
  GPT_CHECK(params.size() == lay.total, "export: {} parameters given, the model has {}", params.size(), lay.total);
  const int64_t C = lay.C;
  const auto Cs = static_cast<size_t>(C);
  // The transposed matrices need storage of their own; everything else is a view of params.
  std::vector<std::vector<float>> owned;
  std::vector<SafetensorsOutput> out;
  const auto view = [&](const std::string& name, size_t at, std::vector<int64_t> shape) {
    size_t n = 1;
    for (const int64_t d : shape) n *= static_cast<size_t>(d);
    out.push_back({"transformer." + name, std::move(shape), params.subspan(at, n)});
  };
  const auto transposed = [&](const std::string& name, size_t at, int64_t rows, int64_t cols) {
    owned.emplace_back(static_cast<size_t>(rows * cols));
    transpose(params.data() + at, rows, cols, owned.back().data());
    out.push_back({"transformer." + name, {cols, rows}, owned.back()});
  };
  owned.reserve(static_cast<size_t>(4 * lay.L));
  view("wte.weight", lay.wte, {lay.V, C});
  view("wpe.weight", lay.wpe, {lay.T, C});
  for (int64_t l = 0; l < lay.L; ++l) {
    const std::string b = fmt::format("h.{}.", l);
    const auto u = static_cast<size_t>(l);
    view(b + "ln_1.weight", lay.ln1w + u * Cs, {C});
    view(b + "ln_1.bias", lay.ln1b + u * Cs, {C});
    transposed(b + "attn.c_attn.weight", lay.qkvw + u * 3 * Cs * Cs, 3 * C, C);
    view(b + "attn.c_attn.bias", lay.qkvb + u * 3 * Cs, {3 * C});
    transposed(b + "attn.c_proj.weight", lay.attprojw + u * Cs * Cs, C, C);
    view(b + "attn.c_proj.bias", lay.attprojb + u * Cs, {C});
    view(b + "ln_2.weight", lay.ln2w + u * Cs, {C});
    view(b + "ln_2.bias", lay.ln2b + u * Cs, {C});
    transposed(b + "mlp.c_fc.weight", lay.fcw + u * 4 * Cs * Cs, 4 * C, C);
    view(b + "mlp.c_fc.bias", lay.fcb + u * 4 * Cs, {4 * C});
    transposed(b + "mlp.c_proj.weight", lay.fcprojw + u * 4 * Cs * Cs, C, 4 * C);
    view(b + "mlp.c_proj.bias", lay.fcprojb + u * Cs, {C});
  }
  view("ln_f.weight", lay.lnfw, {C});
  view("ln_f.bias", lay.lnfb, {C});

  std::error_code ec;
  fs::create_directories(out_dir, ec);
  GPT_CHECK(!ec, "export: cannot create {}: {}", out_dir, ec.message());
  // transformers refuses a safetensors file whose metadata lacks format "pt".
  write_safetensors((fs::path(out_dir) / kWeightsFile).string(), out, {{"format", "pt"}}, options.dtype);

  const nlohmann::ordered_json config = {
      {"architectures", {"GPT2LMHeadModel"}},
      {"model_type", "gpt2"},
      {"vocab_size", m.vocab_size},
      {"n_positions", m.context_length},
      {"n_ctx", m.context_length},
      {"n_embd", m.n_embd},
      {"n_layer", m.n_layer},
      {"n_head", m.n_head},
      {"n_inner", nullptr},
      {"activation_function", "gelu_new"},
      {"resid_pdrop", m.dropout},
      {"embd_pdrop", m.dropout},
      {"attn_pdrop", m.dropout},
      {"layer_norm_epsilon", 1e-5},
      {"initializer_range", m.init_std},
      {"scale_attn_weights", true},
      {"scale_attn_by_inverse_layer_idx", false},
      {"reorder_and_upcast_attn", false},
      {"tie_word_embeddings", true},
      {"bos_token_id", options.eot_token},
      {"eos_token_id", options.eot_token},
      {"use_cache", true},
      {"torch_dtype", options.dtype == "F32" ? "float32" : options.dtype == "BF16" ? "bfloat16" : "float16"},
  };
  const std::string text = config.dump(2) + "\n";
  replace_file_durably((fs::path(out_dir) / kConfigFile).string(), {std::as_bytes(std::span(text.data(), text.size()))});
}

}  // namespace gpt
