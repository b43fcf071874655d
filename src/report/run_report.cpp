#include "report/run_report.h"

#include "core/error.h"
#include "core/printable.h"
#include "report/report_plot.h"
#include "report/run_metrics.h"

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <ctime>
#include <filesystem>

namespace gpt {

ReportFiles write_run_report(const std::vector<std::string>& run_dirs, const std::string& out_base) {
  GPT_CHECK(!run_dirs.empty(), "report: no run directories given");
  std::vector<RunMetrics> runs;
  for (const std::string& dir : run_dirs) runs.push_back(read_run_metrics(dir));
  label_runs(runs);
  std::string names;
  for (const RunMetrics& run : runs) names += (names.empty() ? "" : ", ") + run.label;
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm utc{};
  gmtime_r(&now, &utc);
  const std::string title = fmt::format("gpt-train report: {}  ({:%Y-%m-%d %H:%M} UTC)", names, utc);
  const std::filesystem::path parent = std::filesystem::path(out_base).parent_path();
  if (!parent.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(parent, ec);
    GPT_CHECK(!ec, "report: cannot create '{}': {}", parent.string(), ec.message());
  }
  ReportFiles files{out_base + ".png", out_base + ".svg"};
  draw_report(runs, title, files.png, ImageFormat::Png);
  draw_report(runs, title, files.svg, ImageFormat::Svg);
  return files;
}

void write_run_report_or_warn(const std::string& run_dir) {
  try {
    const ReportFiles files = write_run_report({run_dir}, (std::filesystem::path(run_dir) / "report").string());
    spdlog::debug("report written: {} and {}", files.png, files.svg);
  } catch (const std::exception& e) {
    spdlog::warn("log.report: could not write the report of '{}' (training goes on): {}", run_dir,
                 message_for_log(e.what()));
  }
}

}  // namespace gpt
