#include "cli/report_command.h"

#include "cli/args.h"
#include "core/error.h"
#include "report/run_report.h"

#include <spdlog/spdlog.h>

#include <filesystem>

namespace gpt {
namespace {

const std::vector<OptionSpec> kReportOptions = {
    {"out", "PATH", "Where to write PATH.png and PATH.svg (a .png or .svg ending is dropped; default: RUN_DIR/report "
                    "for one run, ./report for several)."},
};

}  // namespace

int run_report_command(const std::vector<std::string>& argv) {
  const ParsedArgs args = parse_args("report", argv, kReportOptions);
  GPT_CHECK(!args.positionals.empty(), "usage: gpt-train report RUN_DIR [RUN_DIR ...] [--out PATH]");
  std::string out = args.get("out");
  if (out.empty())
    out = args.positionals.size() == 1 ? (std::filesystem::path(args.positionals[0]) / "report").string() : "report";
  for (const char* extension : {".png", ".svg"})
    if (out.size() > 4 && out.ends_with(extension)) out.resize(out.size() - 4);
  const ReportFiles files = write_run_report(args.positionals, out);
  spdlog::info("report of {} run(s): {} and {}", args.positionals.size(), files.png, files.svg);
  return 0;
}

std::string report_help() {
  return "usage: gpt-train report RUN_DIR [RUN_DIR ...] [--out PATH]\n\nDraw one picture of the runs (PNG and "
         "SVG): train and validation loss, learning rate, gradient norm, tokens/s and memory (planned and "
         "measured) against the step, one colour per run, with each run's settings and final numbers.\n\n"
         "options:\n" +
         options_help(kReportOptions);
}

}  // namespace gpt
