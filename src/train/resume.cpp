#include "train/resume.h"

#include "core/error.h"
#include "io/checkpoint.h"
#include "io/durable_file.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <map>
#include <set>

namespace fs = std::filesystem;

namespace gpt {
namespace {

// Model keys that may change on resume: they do not change the parameter shapes.
const std::set<std::string> kModelNonShapeKeys = {"dropout", "init_std", "init_from"};

// "section.key" -> the value as text (flow YAML for lists), from a resolved config.
std::map<std::string, std::string> flatten(const std::string& yaml_text, const std::string& where) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    GPT_FAIL("{}: not valid YAML: {}", where, e.what());
  }
  std::map<std::string, std::string> out;
  if (!root.IsMap()) return out;
  for (const auto& section : root) {
    if (!section.first.IsScalar() || !section.second.IsMap()) continue;
    for (const auto& kv : section.second) {
      if (!kv.first.IsScalar()) continue;
      YAML::Emitter e;
      e << YAML::Flow << kv.second;
      out[section.first.Scalar() + "." + kv.first.Scalar()] = kv.second.IsScalar() ? kv.second.Scalar() : e.c_str();
    }
  }
  return out;
}

std::optional<int64_t> record_step(const std::string& line) {
  constexpr std::string_view kPrefix = "{\"step\":";
  if (line.rfind(kPrefix, 0) != 0 || line.back() != '}') return std::nullopt;
  int64_t step = 0;
  const char* first = line.data() + kPrefix.size();
  auto [ptr, ec] = std::from_chars(first, line.data() + line.size(), step);
  if (ec != std::errc() || ptr == first) return std::nullopt;
  return step;
}

}  // namespace

std::optional<std::string> select_resume_checkpoint(const std::string& run_dir, const std::string& on_corrupt,
                                                    bool set_aside) {
  std::vector<std::string> damaged;
  for (const std::string& dir : list_checkpoints(run_dir)) {
    const std::vector<std::string> problems = verify_checkpoint(dir);
    if (problems.empty()) {
      if (!damaged.empty())
        spdlog::warn("{} '{}', the newest intact checkpoint (checkpoint.on_corrupt: previous)",
                     set_aside ? "resuming from" : "using", dir);
      return dir;
    }
    const std::string report = fmt::format("checkpoint '{}' is damaged: {}", dir, fmt::join(problems, "; "));
    GPT_CHECK(on_corrupt != "fail", "{} (checkpoint.on_corrupt: fail; with previous the run would continue from the "
              "newest intact older checkpoint)", report);
    if (!set_aside) {
      spdlog::error("{}; trying the previous one", report);
      damaged.push_back(dir);
      continue;
    }
    // Out of the way: pruning counts checkpoints by step, and this one must not count as a kept one.
    const std::string aside = dir + ".damaged";
    std::error_code ec;
    fs::remove_all(aside, ec);
    fs::rename(dir, aside, ec);
    GPT_CHECK(!ec, "{}; moving it aside to '{}' failed: {}", report, aside, ec.message());
    spdlog::error("{}; moved to '{}', trying the previous one", report, aside);
    damaged.push_back(dir);
  }
  GPT_CHECK(damaged.empty(), "'{}' has no intact checkpoint: all {} were damaged{}; move them away to start the run "
            "afresh", run_dir, damaged.size(), set_aside ? " (kept as *.damaged)" : "");
  return std::nullopt;
}

std::vector<std::string> check_resume_config(const std::string& checkpoint_config_yaml,
                                             const std::string& current_config_yaml, const std::string& where) {
  const auto old_keys = flatten(checkpoint_config_yaml, where);
  const auto new_keys = flatten(current_config_yaml, "the current config");
  std::set<std::string> names;
  for (const auto& [k, v] : old_keys) names.insert(k);
  for (const auto& [k, v] : new_keys) names.insert(k);
  std::vector<std::string> refused, changed;
  for (const std::string& name : names) {
    const auto o = old_keys.find(name), n = new_keys.find(name);
    const std::string before = o == old_keys.end() ? "(absent)" : o->second;
    const std::string after = n == new_keys.end() ? "(absent)" : n->second;
    if (before == after) continue;
    const bool both = o != old_keys.end() && n != new_keys.end();
    const bool shape = name.rfind("model.", 0) == 0 && !kModelNonShapeKeys.count(name.substr(6));
    if (shape && both)
      refused.push_back(fmt::format("{} is {} in the checkpoint, {} now", name, before, after));
    else
      changed.push_back(fmt::format("{}: {} -> {}", name, before, after));
  }
  GPT_CHECK(refused.empty(), "cannot resume from {}: the model shape changed: {}; resume with the checkpoint's model "
            "settings, or train into a new log.run_dir", where, fmt::join(refused, "; "));
  return changed;
}

void truncate_metrics_after(const std::string& path, int64_t step) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return;
  const std::string text = read_file_bytes(path);
  std::string kept;
  size_t dropped = 0, begin = 0;
  while (begin < text.size()) {
    const size_t end = text.find('\n', begin);
    if (end == std::string::npos) {  // a last line without its newline: a write a crash cut short
      ++dropped;
      break;
    }
    const std::string line = text.substr(begin, end - begin);
    const auto s = record_step(line);
    if (s && *s > step) ++dropped;
    else if (!s && end + 1 == text.size() && !line.empty()) ++dropped;  // a torn last line
    else kept += line + "\n";
    begin = end + 1;
  }
  if (dropped == 0) return;
  const std::string tmp = path + ".tmp";
  write_file_durably(tmp, kept);
  fs::rename(tmp, path, ec);
  GPT_CHECK(!ec, "cannot replace '{}' with '{}': {}", path, tmp, ec.message());
  spdlog::info("{}: dropped {} records after step {} (they are written again)", path, dropped, step);
}

}  // namespace gpt
