#include "io/checkpoint.h"

#include "io/binary_file.h"
#include "io/crc32c.h"
#include "io/durable_file.h"
#include "io/llmc_model_file.h"
#include "io/lora_adapters.h"
#include "io/optimizer_shards.h"

#include <spdlog/spdlog.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <type_traits>

namespace fs = std::filesystem;

namespace gpt {
namespace {

constexpr int32_t kOptimizerMagic = 20261129;
constexpr int32_t kOptimizerVersion = 1;
constexpr int kHeaderInts = 256;
constexpr const char* kBlobPrefix = "blob.";
constexpr const char* kRequiredFiles[] = {"model.bin", "optimizer.bin", "state.yaml", "config.yaml"};

// A name that stays inside the checkpoint directory and cannot collide with the hidden temporaries.
bool safe_name(std::string_view name) {
  if (name.empty() || name.size() > 200 || name[0] == '.') return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
           c == '-';
  });
}

std::string optimizer_bytes(AdamW& optimizer) {
  std::vector<float> state = optimizer.state_to_host();
  std::array<int32_t, kHeaderInts> header{};
  header[0] = kOptimizerMagic;
  header[1] = kOptimizerVersion;
  const auto n = static_cast<uint64_t>(optimizer.num_elements());
  const auto steps = static_cast<uint64_t>(optimizer.step_count());
  header[2] = static_cast<int32_t>(n & 0xffffffffu);
  header[3] = static_cast<int32_t>(n >> 32);
  header[4] = static_cast<int32_t>(steps & 0xffffffffu);
  header[5] = static_cast<int32_t>(steps >> 32);
  std::string bytes(sizeof(header) + state.size() * sizeof(float), '\0');
  std::memcpy(bytes.data(), header.data(), sizeof(header));
  std::memcpy(bytes.data() + sizeof(header), state.data(), state.size() * sizeof(float));
  return bytes;
}

int64_t read_optimizer(const fs::path& path, AdamW& optimizer) {
  const BinaryFile file = BinaryFile::open(path.string(), "optimizer state");
  const OptimizerFileHeader h = read_optimizer_header(file);
  GPT_CHECK(h.num_elements == static_cast<uint64_t>(optimizer.num_elements()),
            "{} holds state for {} parameters, the optimizer has {}", file.label(), h.num_elements,
            optimizer.num_elements());
  std::vector<float> state(2 * h.num_elements);
  file.read_into(kOptimizerHeaderBytes, std::span(state));
  optimizer.state_from_host(state, static_cast<int64_t>(h.step_count));
  return static_cast<int64_t>(h.step_count);
}

std::optional<int64_t> step_of(const std::string& name) {
  constexpr std::string_view kPrefix = "step_";
  if (name.size() <= kPrefix.size() || name.compare(0, kPrefix.size(), kPrefix) != 0) return std::nullopt;
  int64_t step = 0;
  const char* first = name.data() + kPrefix.size();
  const char* last = name.data() + name.size();
  auto [ptr, ec] = std::from_chars(first, last, step);
  if (ec != std::errc() || ptr != last || step < 0) return std::nullopt;
  return step;
}

// (step, directory) of every step_N directory, oldest first.
std::vector<std::pair<int64_t, fs::path>> checkpoint_dirs(const std::string& run_dir) {
  std::vector<std::pair<int64_t, fs::path>> found;
  const fs::path root = fs::path(run_dir) / "checkpoints";
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return found;
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    if (!entry.is_directory(ec)) continue;
    if (auto step = step_of(entry.path().filename().string())) found.emplace_back(*step, entry.path());
  }
  std::sort(found.begin(), found.end());
  return found;
}

// Hidden directories a crash or a failed save left behind: .step_N.tmp, .step_N.old, .step_N.deleting.
void remove_leftovers(const fs::path& root) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(".step_", 0) != 0) continue;
    std::error_code rm;
    fs::remove_all(entry.path(), rm);
    if (rm) spdlog::warn("could not remove the leftover '{}': {}", entry.path().string(), rm.message());
  }
}

// Renames dir aside, then deletes it, so a crash mid-delete never leaves a half checkpoint under a real name.
void remove_checkpoint_dir(const fs::path& dir, const char* suffix) {
  const fs::path aside = dir.parent_path() / ("." + dir.filename().string() + suffix);
  std::error_code ec;
  fs::remove_all(aside, ec);
  fs::rename(dir, aside, ec);
  GPT_CHECK(!ec, "cannot move '{}' aside to '{}': {}", dir.string(), aside.string(), ec.message());
  fsync_directory(dir.parent_path().string());
  fs::remove_all(aside, ec);
  if (ec) spdlog::warn("could not remove '{}': {}", aside.string(), ec.message());
}

std::string hex32(uint32_t v) { return fmt::format("{:08x}", v); }

std::optional<uint32_t> parse_hex32(std::string_view s) {
  uint32_t v = 0;
  if (s.size() != 8) return std::nullopt;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v, 16);
  if (ec != std::errc() || ptr != s.data() + s.size()) return std::nullopt;
  return v;
}

// A YAML scalar as T, or an error naming the key and `where`.
template <class T>
T scalar(const YAML::Node& map, const char* key, const std::string& where) {
  const YAML::Node n = map[key];
  GPT_CHECK(n.IsDefined() && n.IsScalar(), "{}: '{}' is missing or not a scalar", where, key);
  try {
    return n.as<T>();
  } catch (const YAML::Exception&) {
    GPT_FAIL("{}: '{}' has the value '{}', which is not a valid {}", where, key, n.Scalar(),
             std::is_same_v<T, std::string> ? "string" : std::is_unsigned_v<T> ? "non-negative integer" : "integer");
  }
}

YAML::Node load_yaml(std::string_view text, const std::string& where) {
  try {
    return YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    GPT_FAIL("{}: not valid YAML: {}", where, e.what());
  }
}

}  // namespace

std::string checkpoint_dir(const std::string& run_dir, int64_t step) {
  return (fs::path(run_dir) / "checkpoints" / fmt::format("step_{:08d}", step)).string();
}

std::string manifest_to_yaml(const Manifest& manifest) {
  std::string body = fmt::format(
      "# gpt-train checkpoint manifest: each file of this checkpoint, its size and CRC-32C (Castagnoli);\n"
      "# the last line is the CRC-32C of everything above it.\n"
      "format: gpt-train-checkpoint\nversion: {}\nstep: {}\nfiles:\n",
      kManifestVersion, manifest.step);
  for (const ManifestEntry& f : manifest.files)
    body += fmt::format("  - {{name: \"{}\", bytes: {}, crc32c: \"{}\"}}\n", f.name, f.bytes, hex32(f.crc32c));
  return body + fmt::format("manifest_crc32c: \"{}\"\n", hex32(crc32c(body.data(), body.size())));
}

Manifest parse_manifest(std::string_view text, const std::string& where) {
  constexpr std::string_view kSelf = "manifest_crc32c: \"";
  const size_t at = text.rfind(kSelf);
  GPT_CHECK(at != std::string_view::npos && (at == 0 || text[at - 1] == '\n'),
            "{}: the closing manifest_crc32c line is missing (truncated?)", where);
  const std::string_view body = text.substr(0, at);
  const std::string_view tail = text.substr(at + kSelf.size());
  const auto stored = parse_hex32(tail.substr(0, std::min<size_t>(8, tail.size())));
  GPT_CHECK(stored && (tail.substr(8) == "\"\n" || tail.substr(8) == "\""),
            "{}: the manifest_crc32c line is malformed", where);
  const uint32_t actual = crc32c(body.data(), body.size());
  GPT_CHECK(actual == *stored, "{}: CRC-32C of the manifest is {}, its last line says {}; the manifest is damaged",
            where, hex32(actual), hex32(*stored));

  const YAML::Node root = load_yaml(body, where);
  GPT_CHECK(root.IsMap(), "{}: expected a mapping at the top level", where);
  GPT_CHECK(scalar<std::string>(root, "format", where) == "gpt-train-checkpoint",
            "{}: format is not gpt-train-checkpoint", where);
  const auto version = scalar<int>(root, "version", where);
  GPT_CHECK(version == kManifestVersion, "{}: manifest version {} (this gpt-train reads version {}{})", where, version,
            kManifestVersion, version > kManifestVersion ? "; it was written by a newer gpt-train" : "");
  Manifest m;
  m.step = scalar<int64_t>(root, "step", where);
  GPT_CHECK(m.step >= 0, "{}: step {} is negative", where, m.step);
  const YAML::Node files = root["files"];
  GPT_CHECK(files.IsDefined() && files.IsSequence(), "{}: 'files' is missing or not a list", where);
  std::set<std::string> seen;
  for (const auto& f : files) {
    GPT_CHECK(f.IsMap(), "{}: an entry of 'files' is not a mapping", where);
    ManifestEntry e;
    e.name = scalar<std::string>(f, "name", where);
    GPT_CHECK(safe_name(e.name) && e.name != kManifestFile,
              "{}: file name '{}' is not allowed (letters, digits, '_', '.', '-'; no leading '.')", where, e.name);
    GPT_CHECK(seen.insert(e.name).second, "{}: '{}' is listed twice", where, e.name);
    e.bytes = scalar<uint64_t>(f, "bytes", where);
    const auto crc = parse_hex32(scalar<std::string>(f, "crc32c", where));
    GPT_CHECK(crc.has_value(), "{}: the crc32c of '{}' is not 8 hex digits", where, e.name);
    e.crc32c = *crc;
    m.files.push_back(std::move(e));
  }
  return m;
}

std::string checkpoint_state_to_yaml(const CheckpointState& state) {
  YAML::Emitter yaml;
  yaml << YAML::BeginMap;
  yaml << YAML::Key << "step" << YAML::Value << state.step;
  yaml << YAML::Key << "seed" << YAML::Value << state.seed;
  yaml << YAML::Key << "skipped_steps" << YAML::Value << state.skipped_steps;
  yaml << YAML::Key << "loader" << YAML::Value << YAML::BeginMap;
  for (const auto& [key, value] : state.loader) yaml << YAML::Key << key << YAML::Value << value;
  yaml << YAML::EndMap;
  yaml << YAML::Key << "extra" << YAML::Value << YAML::BeginMap;
  for (const auto& [key, value] : state.values)
    yaml << YAML::Key << key << YAML::Value << YAML::DoubleQuoted << value;
  yaml << YAML::EndMap << YAML::EndMap;
  return std::string(yaml.c_str()) + "\n";
}

CheckpointState parse_checkpoint_state(std::string_view text, const std::string& where) {
  const YAML::Node root = load_yaml(text, where);
  GPT_CHECK(root.IsMap(), "{}: expected a mapping at the top level", where);
  CheckpointState s;
  s.step = scalar<int64_t>(root, "step", where);
  GPT_CHECK(s.step >= 0, "{}: step {} is negative", where, s.step);
  s.seed = scalar<uint64_t>(root, "seed", where);
  if (root["skipped_steps"].IsDefined()) s.skipped_steps = scalar<int64_t>(root, "skipped_steps", where);
  GPT_CHECK(s.skipped_steps >= 0 && s.skipped_steps <= s.step, "{}: skipped_steps {} is outside [0, step {}]", where,
            s.skipped_steps, s.step);
  const YAML::Node loader = root["loader"];
  GPT_CHECK(loader.IsDefined() && loader.IsMap(), "{}: 'loader' is missing or not a mapping", where);
  for (const auto& kv : loader) {
    GPT_CHECK(kv.first.IsScalar(), "{}: a key of 'loader' is not a name", where);
    const std::string key = kv.first.Scalar();
    s.loader[key] = scalar<uint64_t>(loader, key.c_str(), where + ": loader");
  }
  const YAML::Node extra = root["extra"];
  if (extra.IsDefined() && !extra.IsNull()) {
    GPT_CHECK(extra.IsMap(), "{}: 'extra' is not a mapping", where);
    for (const auto& kv : extra) {
      GPT_CHECK(kv.first.IsScalar() && kv.second.IsScalar(), "{}: an entry of 'extra' is not 'name: value'", where);
      s.values[kv.first.Scalar()] = kv.second.Scalar();
    }
  }
  return s;
}

OptimizerFileHeader parse_optimizer_header(std::string_view header, const std::string& where) {
  GPT_CHECK(header.size() >= kOptimizerHeaderBytes, "'{}' is shorter than its {}-byte header", where,
            kOptimizerHeaderBytes);
  std::array<int32_t, 6> h{};
  std::memcpy(h.data(), header.data(), sizeof(h));
  GPT_CHECK(h[0] == kOptimizerMagic, "'{}' has magic {}, expected {} (gpt-train optimizer state)", where, h[0],
            kOptimizerMagic);
  GPT_CHECK(h[1] == kOptimizerVersion, "'{}' has version {}, expected {}", where, h[1], kOptimizerVersion);
  auto u64 = [](int32_t lo, int32_t hi) {
    return static_cast<uint32_t>(lo) | (static_cast<uint64_t>(static_cast<uint32_t>(hi)) << 32);
  };
  OptimizerFileHeader out{u64(h[2], h[3]), u64(h[4], h[5])};
  // 2^40 elements would be a 8 TiB file: a larger count is damage, and would overflow the size arithmetic.
  GPT_CHECK(out.num_elements < (uint64_t{1} << 40), "'{}' claims {} parameters; the header is damaged", where,
            out.num_elements);
  return out;
}

OptimizerFileHeader read_optimizer_header(const BinaryFile& file) {
  std::string header(std::min<uint64_t>(file.size(), kOptimizerHeaderBytes), '\0');
  file.read_into(0, std::span(header));
  const OptimizerFileHeader h = parse_optimizer_header(header, file.label());
  file.require_size(ClaimedSize().add({kOptimizerHeaderBytes}).add({h.num_elements, 2, sizeof(float)}).bytes(),
                    fmt::format("the {}-byte header and m and v (fp32) of {} parameters", kOptimizerHeaderBytes,
                                h.num_elements));
  return h;
}

std::string checkpoint_staging_dir(const std::string& run_dir, int64_t step) {
  const fs::path final_dir = checkpoint_dir(run_dir, step);
  return (final_dir.parent_path() / ("." + final_dir.filename().string() + ".tmp")).string();
}

std::string save_checkpoint(const std::string& run_dir, const CheckpointState& state, GPT& model, AdamW& optimizer,
                            const std::string& config_yaml, const OptimizerShardWriter& write_optimizer_shards) {
  for (const auto& [name, blob] : state.blobs)
    GPT_CHECK(safe_name(name), "checkpoint blob name '{}' is not allowed (letters, digits, '_', '.', '-')", name);
  const fs::path final_dir = checkpoint_dir(run_dir, state.step);
  const fs::path root = final_dir.parent_path();
  const fs::path tmp_dir = checkpoint_staging_dir(run_dir, state.step);
  std::error_code ec;
  try {
    fs::create_directories(root, ec);
    GPT_CHECK(!ec, "cannot create the checkpoint directory '{}': {}", root.string(), ec.message());
    remove_leftovers(root);
    fs::create_directory(tmp_dir, ec);
    GPT_CHECK(!ec, "cannot create the checkpoint directory '{}': {}", tmp_dir.string(), ec.message());
    Manifest manifest;
    manifest.step = state.step;
    auto add = [&](const std::string& name, const FileDigest& d) { manifest.files.push_back({name, d.bytes, d.crc32c}); };
    auto write = [&](const std::string& name, std::string_view bytes) {
      add(name, write_file_durably((tmp_dir / name).string(), bytes));
    };
    if (model.lora().enabled()) {
      // A LoRA run saves what it trains, the adapters, and names the frozen base they belong to.
      const auto value = [&](const char* key) {
        auto it = state.values.find(key);
        GPT_CHECK(it != state.values.end(), "a LoRA checkpoint needs the base's identity ('{}' in its state)", key);
        return it->second;
      };
      const LoraBase base{value(kLoraBasePathKey), static_cast<uint32_t>(std::stoul(value(kLoraBaseCrcKey), nullptr, 16))};
      const std::string adapters_path = (tmp_dir / kAdaptersFile).string();
      write_lora_adapters(adapters_path, model, base);
      add(kAdaptersFile, digest_file(adapters_path, /*sync=*/true));
    } else {
      const std::string model_path = (tmp_dir / "model.bin").string();
      write_llmc_model(model_path, llmc_header_of(model.config()), model.parameters_to_host());
      add("model.bin", digest_file(model_path, /*sync=*/true));
    }
    if (write_optimizer_shards) {
      for (const std::string& name : write_optimizer_shards(tmp_dir.string()))
        add(name, digest_file((tmp_dir / name).string(), /*sync=*/true));
    } else {
      write("optimizer.bin", optimizer_bytes(optimizer));
    }
    write("config.yaml", config_yaml);
    for (const auto& [name, blob] : state.blobs) write(kBlobPrefix + name, blob);
    write("state.yaml", checkpoint_state_to_yaml(state));
    write_file_durably((tmp_dir / kManifestFile).string(), manifest_to_yaml(manifest));
    fsync_directory(tmp_dir.string());

    // Only a run that went back to an older checkpoint (on_corrupt: previous) writes a step twice.
    if (fs::exists(final_dir)) remove_checkpoint_dir(final_dir, ".old");
    fs::rename(tmp_dir, final_dir, ec);
    GPT_CHECK(!ec, "cannot rename '{}' to '{}': {}", tmp_dir.string(), final_dir.string(), ec.message());
    fsync_directory(root.string());
  } catch (const Error& e) {
    std::error_code ignored;
    fs::remove_all(tmp_dir, ignored);
    const auto intact = latest_checkpoint(run_dir);
    GPT_FAIL("checkpoint of step {} not written: {}; {}", state.step, e.what(),
             intact ? fmt::format("the newest checkpoint, '{}', is untouched", *intact)
                    : std::string("there is no earlier checkpoint"));
  }
  return final_dir.string();
}

std::vector<std::string> list_checkpoints(const std::string& run_dir) {
  std::vector<std::string> out;
  auto found = checkpoint_dirs(run_dir);
  for (auto it = found.rbegin(); it != found.rend(); ++it) out.push_back(it->second.string());
  return out;
}

std::optional<std::string> latest_checkpoint(const std::string& run_dir) {
  std::error_code ec;
  for (const std::string& dir : list_checkpoints(run_dir))
    if (fs::exists(fs::path(dir) / kManifestFile, ec)) return dir;
  return std::nullopt;
}

std::vector<std::string> verify_checkpoint(const std::string& dir) {
  const fs::path root(dir);
  const fs::path manifest_path = root / kManifestFile;
  std::error_code ec;
  if (!fs::exists(manifest_path, ec))
    return {fmt::format("{} is missing (an incomplete checkpoint, or one written before manifests existed)",
                        kManifestFile)};
  Manifest manifest;
  try {
    manifest = parse_manifest(read_file_bytes(manifest_path.string()), kManifestFile);
  } catch (const Error& e) {
    return {e.what()};
  }
  std::vector<std::string> problems;
  const auto dir_step = step_of(root.filename().string());
  if (dir_step && *dir_step != manifest.step)
    problems.push_back(fmt::format("{}: step {} does not match the directory name", kManifestFile, manifest.step));
  for (const char* required : kRequiredFiles)
    if (std::none_of(manifest.files.begin(), manifest.files.end(), [&](const ManifestEntry& e) {
          return e.name == required || (std::string_view(required) == "optimizer.bin" && is_optimizer_shard_name(e.name)) ||
                 (std::string_view(required) == "model.bin" && e.name == kAdaptersFile);
        }))
      problems.push_back(fmt::format("{} does not list {}", kManifestFile, required));
  for (const ManifestEntry& e : manifest.files) {
    const fs::path path = root / e.name;
    if (!fs::exists(path, ec)) {
      problems.push_back(fmt::format("{}: missing", e.name));
      continue;
    }
    FileDigest d;
    try {
      d = digest_file(path.string());
    } catch (const Error& err) {
      problems.push_back(fmt::format("{}: {}", e.name, err.what()));
      continue;
    }
    if (d.bytes != e.bytes)
      problems.push_back(fmt::format("{}: {} bytes, the manifest says {}", e.name, d.bytes, e.bytes));
    else if (d.crc32c != e.crc32c)
      problems.push_back(fmt::format("{}: CRC-32C {}, the manifest says {}", e.name, hex32(d.crc32c), hex32(e.crc32c)));
  }
  return problems;
}

CheckpointState load_checkpoint(const std::string& dir, GPT& model, AdamW& optimizer, bool verify) {
  const fs::path root(dir);
  if (verify) {
    const auto problems = verify_checkpoint(dir);
    GPT_CHECK(problems.empty(), "checkpoint '{}' is damaged: {}", dir, fmt::join(problems, "; "));
  }
  const Manifest manifest = parse_manifest(read_file_bytes((root / kManifestFile).string()), dir + "/" + kManifestFile);
  const fs::path state_path = root / "state.yaml";
  CheckpointState state = parse_checkpoint_state(read_file_bytes(state_path.string()), state_path.string());
  for (const ManifestEntry& e : manifest.files)
    if (e.name.rfind(kBlobPrefix, 0) == 0)
      state.blobs[e.name.substr(std::strlen(kBlobPrefix))] = read_file_bytes((root / e.name).string());

  const bool has_adapters = fs::exists(root / kAdaptersFile);
  GPT_CHECK(!has_adapters || model.lora().enabled(),
            "'{}' holds LoRA adapters, but this run has finetune.lora.rank 0: set finetune.lora as the run that wrote "
            "it did", dir);
  GPT_CHECK(has_adapters || !model.lora().enabled(),
            "'{}' holds a whole model, but this run trains LoRA adapters (finetune.lora.rank > 0): resume with "
            "finetune.lora.rank 0, or start the LoRA run fresh with model.init_from pointing at its model.bin", dir);
  std::vector<float> params;
  if (!has_adapters) params = read_llmc_parameters((root / "model.bin").string(), llmc_header_of(model.config()));
  const int64_t optimizer_steps = optimizer.owns_all() && fs::exists(root / "optimizer.bin")
                                      ? read_optimizer(root / "optimizer.bin", optimizer)
                                      : read_optimizer_state(dir, optimizer, model.parameter_layout());
  GPT_CHECK(state.step == optimizer_steps + state.skipped_steps,
            "'{}': state step {} disagrees with the optimizer's {} updates and {} skipped steps", dir, state.step,
            optimizer_steps, state.skipped_steps);
  if (has_adapters) read_lora_adapters((root / kAdaptersFile).string(), model);
  else model.parameters_from_host(params);
  return state;
}

void prune_checkpoints(const std::string& run_dir, int keep_last) {
  if (keep_last <= 0) return;
  auto found = checkpoint_dirs(run_dir);
  for (size_t i = 0; i + static_cast<size_t>(keep_last) < found.size(); ++i) {
    try {
      remove_checkpoint_dir(found[i].second, ".deleting");
    } catch (const Error& e) {
      spdlog::warn("could not remove the old checkpoint '{}': {}", found[i].second.string(), e.what());
    }
  }
}

}  // namespace gpt
