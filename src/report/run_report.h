// `gpt-train report` and the trainer's log.report: the picture of one or more runs, as PNG and SVG.
#pragma once

#include <string>
#include <vector>

namespace gpt {

struct ReportFiles {
  std::string png, svg;
};

// Draws run_dirs into out_base.png and out_base.svg. Throws when a directory holds no metrics, naming it,
// or when the picture cannot be written.
ReportFiles write_run_report(const std::vector<std::string>& run_dirs, const std::string& out_base);

// run_dir/report.png and run_dir/report.svg, for training: a failure is logged as a warning and training
// goes on, since the picture is worth less than the run.
void write_run_report_or_warn(const std::string& run_dir);

}  // namespace gpt
