#include "io/checkpoint.h"

#include "io/llmc_model_file.h"

#include <spdlog/spdlog.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>

namespace fs = std::filesystem;

namespace gpt {
namespace {

constexpr int32_t kOptimizerMagic = 20261129;
constexpr int32_t kOptimizerVersion = 1;
constexpr int kHeaderInts = 256;

LlmcModelHeader header_of(const ModelConfig& m) {
  LlmcModelHeader h;
  h.max_seq_len = m.context_length;
  h.vocab_size = m.vocab_size;
  h.num_layers = m.n_layer;
  h.num_heads = m.n_head;
  h.channels = m.n_embd;
  h.padded_vocab_size = m.padded_vocab_size();
  return h;
}

void write_file(const fs::path& path, const void* data, size_t bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  GPT_CHECK(out.good(), "cannot create '{}'", path.string());
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(bytes));
  out.flush();
  GPT_CHECK(out.good(), "writing {} bytes to '{}' failed (disk full?)", bytes, path.string());
}

void write_optimizer(const fs::path& path, AdamW& optimizer, int64_t num_parameters) {
  std::vector<float> state = optimizer.state_to_host();
  std::array<int32_t, kHeaderInts> header{};
  header[0] = kOptimizerMagic;
  header[1] = kOptimizerVersion;
  const auto n = static_cast<uint64_t>(num_parameters);
  const auto steps = static_cast<uint64_t>(optimizer.step_count());
  header[2] = static_cast<int32_t>(n & 0xffffffffu);
  header[3] = static_cast<int32_t>(n >> 32);
  header[4] = static_cast<int32_t>(steps & 0xffffffffu);
  header[5] = static_cast<int32_t>(steps >> 32);
  std::vector<char> bytes(sizeof(header) + state.size() * sizeof(float));
  std::memcpy(bytes.data(), header.data(), sizeof(header));
  std::memcpy(bytes.data() + sizeof(header), state.data(), state.size() * sizeof(float));
  write_file(path, bytes.data(), bytes.size());
}

void read_optimizer(const fs::path& path, AdamW& optimizer, int64_t num_parameters) {
  std::ifstream in(path, std::ios::binary);
  GPT_CHECK(in.good(), "cannot open optimizer state '{}'", path.string());
  std::array<int32_t, kHeaderInts> header{};
  in.read(reinterpret_cast<char*>(header.data()), sizeof(header));
  GPT_CHECK(in.gcount() == sizeof(header), "'{}' is shorter than its {}-byte header", path.string(), sizeof(header));
  GPT_CHECK(header[0] == kOptimizerMagic, "'{}' has magic {}, expected {} (gpt-train optimizer state)", path.string(),
            header[0], kOptimizerMagic);
  GPT_CHECK(header[1] == kOptimizerVersion, "'{}' has version {}, expected {}", path.string(), header[1],
            kOptimizerVersion);
  const uint64_t n = static_cast<uint32_t>(header[2]) | (static_cast<uint64_t>(static_cast<uint32_t>(header[3])) << 32);
  const uint64_t steps =
      static_cast<uint32_t>(header[4]) | (static_cast<uint64_t>(static_cast<uint32_t>(header[5])) << 32);
  GPT_CHECK(n == static_cast<uint64_t>(num_parameters), "'{}' holds state for {} parameters, the model has {}",
            path.string(), n, num_parameters);
  std::vector<float> state(2 * n);
  in.read(reinterpret_cast<char*>(state.data()), static_cast<std::streamsize>(state.size() * sizeof(float)));
  GPT_CHECK(static_cast<size_t>(in.gcount()) == state.size() * sizeof(float), "'{}' is truncated: expected {} bytes of state",
            path.string(), state.size() * sizeof(float));
  optimizer.state_from_host(state, static_cast<int64_t>(steps));
}

std::optional<int64_t> step_of(const fs::path& dir) {
  static const std::regex kPattern("step_([0-9]+)");
  std::smatch m;
  const std::string name = dir.filename().string();
  if (!std::regex_match(name, m, kPattern)) return std::nullopt;
  return std::stoll(m[1].str());
}

std::vector<std::pair<int64_t, fs::path>> complete_checkpoints(const std::string& run_dir) {
  std::vector<std::pair<int64_t, fs::path>> found;
  const fs::path root = fs::path(run_dir) / "checkpoints";
  if (!fs::is_directory(root)) return found;
  for (const auto& entry : fs::directory_iterator(root)) {
    if (!entry.is_directory()) continue;
    if (auto step = step_of(entry.path()); step && fs::exists(entry.path() / "state.yaml"))
      found.emplace_back(*step, entry.path());
  }
  std::sort(found.begin(), found.end());
  return found;
}

}  // namespace

std::string checkpoint_dir(const std::string& run_dir, int64_t step) {
  return (fs::path(run_dir) / "checkpoints" / fmt::format("step_{:08d}", step)).string();
}

std::string save_checkpoint(const std::string& run_dir, const CheckpointState& state, GPT& model, AdamW& optimizer,
                            const std::string& config_yaml) {
  const fs::path final_dir = checkpoint_dir(run_dir, state.step);
  const fs::path tmp_dir = final_dir.parent_path() / ("." + final_dir.filename().string() + ".tmp");
  std::error_code ec;
  fs::remove_all(tmp_dir, ec);
  fs::create_directories(tmp_dir, ec);
  GPT_CHECK(!ec, "cannot create checkpoint directory '{}': {}", tmp_dir.string(), ec.message());

  write_llmc_model((tmp_dir / "model.bin").string(), header_of(model.config()), model.parameters_to_host());
  write_optimizer(tmp_dir / "optimizer.bin", optimizer, model.num_parameters());
  write_file(tmp_dir / "config.yaml", config_yaml.data(), config_yaml.size());
  YAML::Emitter yaml;
  yaml << YAML::BeginMap << YAML::Key << "step" << YAML::Value << state.step << YAML::Key << "seed" << YAML::Value
       << state.seed << YAML::Key << "loader" << YAML::Value << YAML::BeginMap;
  for (const auto& [key, value] : state.loader) yaml << YAML::Key << key << YAML::Value << value;
  yaml << YAML::EndMap << YAML::EndMap;
  const std::string text = std::string(yaml.c_str()) + "\n";
  // state.yaml last: its presence marks a complete checkpoint.
  write_file(tmp_dir / "state.yaml", text.data(), text.size());

  fs::remove_all(final_dir, ec);
  fs::rename(tmp_dir, final_dir, ec);
  GPT_CHECK(!ec, "cannot rename '{}' to '{}': {}", tmp_dir.string(), final_dir.string(), ec.message());
  return final_dir.string();
}

std::optional<std::string> latest_checkpoint(const std::string& run_dir) {
  auto found = complete_checkpoints(run_dir);
  if (found.empty()) return std::nullopt;
  return found.back().second.string();
}

CheckpointState load_checkpoint(const std::string& dir, GPT& model, AdamW& optimizer) {
  const fs::path root(dir);
  const fs::path state_path = root / "state.yaml";
  GPT_CHECK(fs::exists(state_path), "'{}' is not a complete checkpoint: state.yaml is missing", dir);
  std::vector<float> params(static_cast<size_t>(model.num_parameters()));
  read_llmc_parameters((root / "model.bin").string(), header_of(model.config()), params);
  model.parameters_from_host(params);
  read_optimizer(root / "optimizer.bin", optimizer, model.num_parameters());

  CheckpointState state;
  try {
    YAML::Node node = YAML::LoadFile(state_path.string());
    state.step = node["step"].as<int64_t>();
    state.seed = node["seed"].as<uint64_t>();
    for (const auto& kv : node["loader"]) state.loader[kv.first.as<std::string>()] = kv.second.as<uint64_t>();
  } catch (const YAML::Exception& e) {
    GPT_FAIL("'{}' is not a valid checkpoint state file: {}", state_path.string(), e.what());
  }
  GPT_CHECK(state.step == optimizer.step_count(), "'{}': state step {} disagrees with the optimizer's {}", dir,
            state.step, optimizer.step_count());
  return state;
}

void prune_checkpoints(const std::string& run_dir, int keep_last) {
  if (keep_last <= 0) return;
  auto found = complete_checkpoints(run_dir);
  for (size_t i = 0; i + static_cast<size_t>(keep_last) < found.size(); ++i) {
    std::error_code ec;
    fs::remove_all(found[i].second, ec);
    if (ec) spdlog::warn("could not remove old checkpoint '{}': {}", found[i].second.string(), ec.message());
  }
}

}  // namespace gpt
