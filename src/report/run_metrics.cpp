#include "report/run_metrics.h"

#include "config/config_loader.h"
#include "core/error.h"

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <filesystem>
#include <fstream>
#include <limits>
#include <map>

namespace fs = std::filesystem;

namespace gpt {
namespace {

double number_or_nan(const nlohmann::json& value) {
  return value.is_number() ? value.get<double>() : std::numeric_limits<double>::quiet_NaN();
}

std::string settings_of(const fs::path& config_path) {
  std::error_code ec;
  if (!fs::exists(config_path, ec)) return "";
  try {
    const Config c = load_config(config_path.string());
    return fmt::format("{}, B{} x T{} x K{}, recompute {}, lr {:g}", c.precision.recipe, c.train.batch_size,
                       c.train.seq_len, c.train.grad_accum_steps, c.recompute.mode, c.optim.lr);
  } catch (const std::exception& e) {
    // The picture is still worth drawing: the settings only annotate the legend.
    spdlog::warn("report: cannot read the settings of '{}': {}", config_path.string(), e.what());
    return "";
  }
}

}  // namespace

RunMetrics read_run_metrics(const std::string& run_dir) {
  std::error_code ec;
  GPT_CHECK(fs::is_directory(run_dir, ec),
            "report: '{}' is not a directory; give the run directories (log.run_dir) of training runs", run_dir);
  const fs::path path = fs::path(run_dir) / "metrics.jsonl";
  GPT_CHECK(fs::exists(path, ec),
            "report: '{}' has no metrics: there is no metrics.jsonl in it; `gpt-train train` writes one into its "
            "log.run_dir from the first step on",
            run_dir);
  std::ifstream in(path);
  GPT_CHECK(in.is_open(), "report: cannot open '{}'", path.string());
  RunMetrics run;
  run.dir = run_dir;
  size_t lines = 0;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    ++lines;
    const nlohmann::json record = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!record.is_object() || !record.contains("step") || !record["step"].is_number()) {
      ++run.unreadable_lines;
      continue;
    }
    const double step = record["step"].get<double>();
    const auto series = [&](const char* key, Series& out) {
      if (record.contains(key)) out.add(step, number_or_nan(record[key]));
    };
    const auto once = [&](const char* key, std::optional<double>& out) {
      if (record.contains(key) && record[key].is_number()) out = record[key].get<double>();
    };
    series("loss", run.loss);
    series("val_loss", run.val_loss);
    series("lr", run.lr);
    series("grad_norm", run.grad_norm);
    series("tokens_per_s", run.tokens_per_s);
    series("peak_rss_bytes", run.peak_rss_bytes);
    series("device_held_bytes", run.device_held_bytes);
    series("device_used_bytes", run.device_used_bytes);
    once("memory_planned_bytes", run.memory_planned_bytes);
    once("activations_planned_bytes", run.activations_planned_bytes);
    once("activations_measured_bytes", run.activations_measured_bytes);
    once("device_total_bytes", run.device_total_bytes);
  }
  GPT_CHECK(!run.loss.empty(),
            "report: '{}' has no metrics: its metrics.jsonl holds no training step ({} line(s){}); a run writes one "
            "per step",
            run_dir, lines, run.unreadable_lines > 0 ? fmt::format(", {} unreadable", run.unreadable_lines) : "");
  if (run.unreadable_lines > 0)
    spdlog::warn("report: {}: {} line(s) are not metrics records and were left out", path.string(),
                 run.unreadable_lines);
  run.settings = settings_of(fs::path(run_dir) / "config.yaml");
  return run;
}

void label_runs(std::vector<RunMetrics>& runs) {
  // The shortest tail of each path (one component, then two, ...) that no other run shares.
  std::vector<std::vector<std::string>> parts(runs.size());
  for (size_t i = 0; i < runs.size(); ++i) {
    const fs::path p = fs::weakly_canonical(fs::path(runs[i].dir));
    for (const auto& part : p) {
      const std::string s = part.string();
      if (!s.empty() && s != "/") parts[i].push_back(s);
    }
  }
  const auto tail = [&](size_t i, size_t n) {
    std::string out;
    const auto& v = parts[i];
    for (size_t k = v.size() - std::min(n, v.size()); k < v.size(); ++k) out += (out.empty() ? "" : "/") + v[k];
    return out;
  };
  for (size_t i = 0; i < runs.size(); ++i) {
    size_t n = 1;
    for (;; ++n) {
      bool unique = true;
      for (size_t j = 0; j < runs.size() && unique; ++j)
        if (j != i && tail(i, n) == tail(j, n)) unique = false;
      if (unique || n >= parts[i].size()) break;
    }
    runs[i].label = tail(i, n);
    if (runs[i].label.empty()) runs[i].label = runs[i].dir;
  }
}

}  // namespace gpt
