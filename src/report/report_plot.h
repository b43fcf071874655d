// The picture of one or more runs, drawn with PLplot: six panels (loss, learning rate, gradient norm,
// tokens/s, memory, and the legend with each run's settings and final numbers), one colour per run.
//
// PNG comes from PLplot's cairo driver (pngcairo: antialiased lines and real fonts); SVG from PLplot's own
// svg driver, which keeps every title, label and legend entry as <text>, so the SVG is searchable and
// its words can be checked, where cairo's SVG turns text into outlines.
#pragma once

#include "report/run_metrics.h"

#include <string>
#include <vector>

namespace gpt {

enum class ImageFormat { Png, Svg };

inline constexpr int kReportWidth = 1500;  // pixels (PNG) or points (SVG)
inline constexpr int kReportHeight = 1000;

// Throws when PLplot lacks the output device the format needs, naming the package that provides it.
void check_plot_device(ImageFormat format);

// Writes the picture of runs (at least one, each with a training step) to path.
void draw_report(const std::vector<RunMetrics>& runs, const std::string& title, const std::string& path,
                 ImageFormat format);

}  // namespace gpt
