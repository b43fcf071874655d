#include "report/report_plot.h"

#include "core/error.h"

#include <fmt/format.h>
#include <plplot.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <string_view>

namespace gpt {
namespace {

// Okabe and Ito's colour-blind-safe palette (without its yellow, too pale on white), one colour per run.
struct Rgb {
  PLINT r, g, b;
};
constexpr Rgb kRunColours[] = {{0, 114, 178}, {213, 94, 0},   {0, 158, 115}, {204, 121, 167},
                               {230, 159, 0}, {86, 180, 233}, {0, 0, 0}};
constexpr size_t kRunColourCount = sizeof(kRunColours) / sizeof(kRunColours[0]);
// Colour map 0: the background, the ink of axes and text, the grid, then the runs.
constexpr PLINT kInk = 1, kGrid = 2, kFirstRun = 3;
constexpr PLINT kSolid = 1, kShortDashed = 2, kDashed = 3;
constexpr PLINT kCircle = 4;  // Hershey symbol of plpoin

PLINT run_colour(size_t run) { return kFirstRun + static_cast<PLINT>(run % kRunColourCount); }

// PLplot reads '#' as the start of an escape sequence ("#u" superscript, ...); "##" is a '#'.
std::string plplot_text(std::string_view text) {
  std::string out;
  for (char c : text) {
    out += c;
    if (c == '#') out += '#';
  }
  return out;
}

// PLplot ends the process from plexit() on a fatal error unless the exit handler does not return; throwing
// unwinds through its C frames (built with unwind tables, as Debian's x86-64 and arm64 toolchains do by
// default), so the caller gets a gpt::Error as from everything else.
int throw_on_plplot_exit(PLCHAR_VECTOR message) { GPT_FAIL("report: PLplot failed: {}", message); }

// plabort() messages: an operation PLplot skipped, which leaves the picture incomplete.
std::vector<std::string>& plplot_aborts() {
  static std::vector<std::string> messages;
  return messages;
}
void record_plplot_abort(PLCHAR_VECTOR message) { plplot_aborts().emplace_back(message); }

// 0.3 rather than 0.30000000000000004; 25k and 1.5M rather than 25000 and 1500000.
std::string tick_text(double value) {
  const double a = std::abs(value);
  if (a < 1e-300) return "0";
  if (a >= 1e6) return fmt::format("{:.4g}M", value / 1e6);
  if (a >= 1e4) return fmt::format("{:.4g}k", value / 1e3);
  return fmt::format("{:.4g}", value);
}

void tick_label(PLINT, PLFLT value, PLCHAR_NC_VECTOR label, PLINT length, PLPointer) {
  const std::string text = tick_text(value);
  const size_t n = std::min(text.size(), static_cast<size_t>(std::max(1, length)) - 1);
  std::memcpy(label, text.data(), n);
  label[n] = '\0';
}

struct Range {
  double lo = 0.0, hi = 1.0;
  bool log = false;  // lo and hi are then log10 of the values
  double at(double value) const { return log ? std::log10(value) : value; }
};

// Log-scaled where it helps: when the values span a decade or more (an early loss, a gradient-norm spike),
// which a linear axis would squeeze the rest of the run under. The log window is whole decades, so every
// log axis has at least two labelled ticks.
Range value_range(const std::vector<std::pair<const Series*, double>>& series, bool allow_log, bool from_zero) {
  double lo = INFINITY, hi = -INFINITY;
  for (const auto& [s, scale] : series)
    for (double v : s->value)
      if (std::isfinite(v)) {
        lo = std::min(lo, v * scale);
        hi = std::max(hi, v * scale);
      }
  Range r;
  if (!std::isfinite(lo)) return r;
  if (allow_log && lo > 0.0 && hi / lo >= 10.0) {
    r.log = true;
    r.lo = std::floor(std::log10(lo));
    r.hi = std::ceil(std::log10(hi));
    if (r.hi <= r.lo) r.hi = r.lo + 1.0;
    return r;
  }
  if (from_zero && lo > 0.0) lo = 0.0;
  const double pad = hi > lo ? 0.05 * (hi - lo) : (hi != 0.0 ? 0.1 * std::abs(hi) : 1.0);
  r.lo = from_zero && lo == 0.0 ? 0.0 : lo - pad;
  r.hi = hi + pad;
  return r;
}

Range step_range(const std::vector<RunMetrics>& runs) {
  double lo = INFINITY, hi = -INFINITY;
  for (const RunMetrics& run : runs)
    for (double s : run.loss.step) {
      lo = std::min(lo, s);
      hi = std::max(hi, s);
    }
  Range r;
  r.lo = lo;
  r.hi = hi > lo ? hi : lo + 1.0;
  return r;
}

// The series as lines, broken where a value is missing (a non-finite loss logged as null), scaled by
// `scale`; a lone point between gaps, and every point when `symbols`, as a circle.
void draw_series(const Series& s, const Range& y, double scale, PLINT colour, PLINT style, bool symbols) {
  plcol0(colour);
  pllsty(style);
  plwidth(2.0);
  std::vector<PLFLT> xs, ys;
  const auto flush = [&] {
    if (xs.size() >= 2) plline(static_cast<PLINT>(xs.size()), xs.data(), ys.data());
    if (!xs.empty() && (symbols || xs.size() == 1)) {
      pllsty(kSolid);
      plpoin(static_cast<PLINT>(xs.size()), xs.data(), ys.data(), kCircle);
      pllsty(style);
    }
    xs.clear();
    ys.clear();
  };
  for (size_t i = 0; i < s.step.size(); ++i) {
    const double v = s.value[i] * scale;
    if (!std::isfinite(v) || (y.log && v <= 0.0)) {
      flush();
      continue;
    }
    xs.push_back(s.step[i]);
    ys.push_back(y.at(v));
  }
  flush();
  pllsty(kSolid);
}

// Panels on a 3 x 2 grid below the page title, in normalised page coordinates, with room for the labels.
struct Viewport {
  double x0, x1, y0, y1;
};
constexpr double kTitleHeight = 0.06;
constexpr double kTextScale = 0.55;  // of PLplot's default character height, which suits a smaller page
Viewport panel(int column, int row) {
  const double width = 1.0 / 3.0, height = (1.0 - kTitleHeight) / 2.0;
  const double top = 1.0 - kTitleHeight - row * height;
  return {column * width + 0.065, (column + 1) * width - 0.02, top - height + 0.07, top - 0.045};
}

void frame(const Viewport& v, const Range& x, const Range& y, const std::string& title, const std::string& y_label) {
  plvpor(v.x0, v.x1, v.y0, v.y1);
  plwind(x.lo, x.hi, y.lo, y.hi);
  plcol0(kGrid);
  plwidth(0.5);
  plbox("g", 0.0, 0, y.log ? "gh" : "g", 0.0, 0);
  plcol0(kInk);
  plwidth(1.0);
  // Custom tick labels ("o") on linear axes; log axes write their decades as plain numbers ("lf").
  plbox("bcnsto", 0.0, 0, y.log ? "bcnstvlf" : "bcnstvo", 0.0, 0);
  plmtex("b", 2.6, 0.5, 0.5, "step");
  plmtex("l", 5.4, 0.5, 0.5, plplot_text(y_label).c_str());
  plschr(0.0, kTextScale * 1.15);
  plmtex("t", 1.0, 0.5, 0.5, plplot_text(title + (y.log ? " (log scale)" : "")).c_str());
  plschr(0.0, kTextScale);
}

void no_data_note(const std::string& text) {
  plcol0(kInk);
  plmtex("t", -3.0, 0.5, 0.5, plplot_text(text).c_str());
}

// A panel of one series per run.
void series_panel(const std::vector<RunMetrics>& runs, const Range& x, const Viewport& v, Series RunMetrics::*member,
                  const std::string& title, const std::string& y_label, bool allow_log, bool from_zero) {
  std::vector<std::pair<const Series*, double>> all;
  for (const RunMetrics& run : runs) all.emplace_back(&(run.*member), 1.0);
  const Range y = value_range(all, allow_log, from_zero);
  frame(v, x, y, title, y_label);
  bool any = false;
  for (size_t i = 0; i < runs.size(); ++i) {
    draw_series(runs[i].*member, y, 1.0, run_colour(i), kSolid, false);
    any = any || !(runs[i].*member).empty();
  }
  if (!any) no_data_note("not in these runs' metrics");
}

void loss_panel(const std::vector<RunMetrics>& runs, const Range& x, const Viewport& v) {
  std::vector<std::pair<const Series*, double>> all;
  for (const RunMetrics& run : runs) {
    all.emplace_back(&run.loss, 1.0);
    all.emplace_back(&run.val_loss, 1.0);
  }
  const Range y = value_range(all, true, false);
  frame(v, x, y, "Loss: train (solid), validation (dashed)", "cross-entropy (nats/token)");
  for (size_t i = 0; i < runs.size(); ++i) {
    draw_series(runs[i].loss, y, 1.0, run_colour(i), kSolid, false);
    draw_series(runs[i].val_loss, y, 1.0, run_colour(i), kDashed, true);
  }
}

constexpr double kMiB = 1024.0 * 1024.0, kGiB = 1024.0 * kMiB;

std::string bytes_text(double bytes) {
  return bytes >= kGiB ? fmt::format("{:.2f} GiB", bytes / kGiB) : fmt::format("{:.1f} MiB", bytes / kMiB);
}

// What a run measured of the memory the ledger plans: on a backend with device memory of its own the bytes
// the run holds there (its arenas and the backend's workspace), else the process's peak resident set.
const Series& measured_memory(const RunMetrics& run) {
  return run.device_held_bytes.empty() ? run.peak_rss_bytes : run.device_held_bytes;
}

void memory_panel(const std::vector<RunMetrics>& runs, const Range& x, const Viewport& v) {
  double most = 0.0;
  for (const RunMetrics& run : runs) {
    most = std::max(most, run.memory_planned_bytes.value_or(0.0));
    for (const Series* s : {&measured_memory(run), &run.device_used_bytes})
      for (double b : s->value)
        if (std::isfinite(b)) most = std::max(most, b);
  }
  const bool gib = most >= 2.0 * kGiB;
  const double scale = 1.0 / (gib ? kGiB : kMiB);
  // The planned total as a level line over the steps each run covers.
  std::vector<Series> planned(runs.size());
  std::vector<std::pair<const Series*, double>> all;
  for (size_t i = 0; i < runs.size(); ++i) {
    if (runs[i].memory_planned_bytes) {
      planned[i].add(runs[i].loss.step.front(), *runs[i].memory_planned_bytes);
      planned[i].add(runs[i].loss.step.back(), *runs[i].memory_planned_bytes);
    }
    all.emplace_back(&planned[i], scale);
    all.emplace_back(&measured_memory(runs[i]), scale);
    all.emplace_back(&runs[i].device_used_bytes, scale);
  }
  const Range y = value_range(all, false, true);
  // The device's own count adds what the ledger does not plan (the driver's context, other processes), so it
  // is drawn beside the measurement (short dashes, in the legend), not as it.
  frame(v, x, y, "Memory: planned (dashed), measured (solid)", gib ? "GiB" : "MiB");
  bool any = false;
  for (size_t i = 0; i < runs.size(); ++i) {
    draw_series(planned[i], y, scale, run_colour(i), kDashed, false);
    draw_series(measured_memory(runs[i]), y, scale, run_colour(i), kSolid, false);
    draw_series(runs[i].device_used_bytes, y, scale, run_colour(i), kShortDashed, false);
    any = any || !planned[i].empty() || !measured_memory(runs[i]).empty();
  }
  if (!any) no_data_note("no memory records in these runs");
}

double last_finite(const Series& s) {
  for (size_t i = s.value.size(); i-- > 0;)
    if (std::isfinite(s.value[i])) return s.value[i];
  return NAN;
}

// The median, not the mean: the first step (allocation, page faults) and a checkpoint's pause are outliers.
double median_finite(const Series& s) {
  std::vector<double> v;
  for (double x : s.value)
    if (std::isfinite(x)) v.push_back(x);
  if (v.empty()) return NAN;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

// The lines under each run's name: where its loss ended and how fast it went, then its memory (a second
// memory line on a device: what the device has in use, and the host's peak).
std::vector<std::string> run_summary(const RunMetrics& run) {
  std::string loss = fmt::format("steps {:g}-{:g}: loss {:.4g}", run.loss.step.front(), run.loss.step.back(),
                                 last_finite(run.loss));
  if (!run.val_loss.empty()) loss += fmt::format(", validation {:.4g}", last_finite(run.val_loss));
  if (!run.tokens_per_s.empty()) loss += ", " + tick_text(median_finite(run.tokens_per_s)) + " tokens/s (median)";
  std::vector<std::string> lines = {loss};
  std::string memory;
  const auto add = [&](const std::string& part) { memory += (memory.empty() ? "memory: " : ", ") + part; };
  const bool device = !run.device_held_bytes.empty();
  if (device) {
    const double held = last_finite(run.device_held_bytes);
    const bool as_planned = run.memory_planned_bytes && *run.memory_planned_bytes == held;
    add("device " + bytes_text(held) + (as_planned ? " as planned" : " held"));
    if (run.memory_planned_bytes && !as_planned) add("planned " + bytes_text(*run.memory_planned_bytes));
  } else {
    if (!run.peak_rss_bytes.empty()) add("peak " + bytes_text(last_finite(run.peak_rss_bytes)));
    if (run.memory_planned_bytes) add("planned " + bytes_text(*run.memory_planned_bytes));
  }
  if (run.activations_planned_bytes && run.activations_measured_bytes)
    add(*run.activations_planned_bytes == *run.activations_measured_bytes
            ? "activations as planned"
            : fmt::format("activations {} measured, {} planned", bytes_text(*run.activations_measured_bytes),
                          bytes_text(*run.activations_planned_bytes)));
  if (!memory.empty()) lines.push_back(memory);
  if (device) {
    std::string use;
    if (!run.device_used_bytes.empty())
      use = fmt::format("device in use {}{}", bytes_text(last_finite(run.device_used_bytes)),
                        run.device_total_bytes ? " of " + bytes_text(*run.device_total_bytes) : "");
    if (!run.peak_rss_bytes.empty())
      use += (use.empty() ? "" : ", ") + std::string("host peak ") + bytes_text(last_finite(run.peak_rss_bytes));
    if (!use.empty()) lines.push_back(use);
  }
  return lines;
}

void legend_panel(const std::vector<RunMetrics>& runs, const Viewport& v) {
  plvpor(v.x0 - 0.05, 1.0, v.y0 - 0.05, v.y1 + 0.02);
  plwind(0.0, 1.0, 0.0, 1.0);
  std::vector<PLINT> opts, colours, styles, symbol_colours, symbol_numbers;
  std::vector<PLFLT> widths, symbol_scales;
  std::vector<std::string> texts, symbols;
  const auto entry = [&](PLINT opt, PLINT colour, PLINT style, bool symbol, std::string text) {
    opts.push_back(opt | (symbol ? PL_LEGEND_SYMBOL : 0));
    colours.push_back(colour);
    styles.push_back(style);
    widths.push_back(2.0);
    symbol_colours.push_back(colour);
    symbol_scales.push_back(1.0);
    symbol_numbers.push_back(symbol ? 2 : 0);
    symbols.push_back("#(229)");  // a Hershey circle, the plpoin symbol of the validation points
    texts.push_back(plplot_text(text));
  };
  for (size_t i = 0; i < runs.size(); ++i) {
    entry(PL_LEGEND_LINE, run_colour(i), kSolid, false,
          runs[i].label + (runs[i].settings.empty() ? "" : ": " + runs[i].settings));
    for (const std::string& line : run_summary(runs[i])) entry(PL_LEGEND_NONE, kInk, kSolid, false, line);
  }
  size_t devices = 0;
  for (const RunMetrics& run : runs) devices += !run.device_held_bytes.empty();
  entry(PL_LEGEND_LINE, kInk, kSolid, false,
        devices == 0              ? "train loss; memory measured (peak resident set)"
        : devices == runs.size() ? "train loss; memory measured (device bytes the run holds)"
                                  : "train loss; memory measured (device bytes held, or peak resident set)");
  entry(PL_LEGEND_LINE, kInk, kDashed, true, "validation loss");
  entry(PL_LEGEND_LINE, kInk, kDashed, false, "memory planned (the ledger's total)");
  if (devices > 0) entry(PL_LEGEND_LINE, kInk, kShortDashed, false, "device memory in use (cudaMemGetInfo)");
  std::vector<const char*> text_ptrs, symbol_ptrs;
  for (const auto& t : texts) text_ptrs.push_back(t.c_str());
  for (const auto& s : symbols) symbol_ptrs.push_back(s.c_str());
  const std::vector<PLINT> text_colours(opts.size(), kInk);
  const auto n = static_cast<PLINT>(opts.size());
  // Of PLplot's default character height; long lists get a smaller text, so that several runs still fit.
  const PLFLT text_scale = std::clamp(1.2 / std::sqrt(static_cast<double>(n)), 0.25, 0.37);
  PLFLT width = 0.0, height = 0.0;
  plcol0(kInk);
  plschr(0.0, kTextScale * 1.15);
  plmtex("t", 1.0, 0.0, 0.0, "Runs");
  plschr(0.0, kTextScale);
  pllegend(&width, &height, PL_LEGEND_BACKGROUND, PL_POSITION_LEFT | PL_POSITION_TOP | PL_POSITION_INSIDE, 0.0,
           0.0, 0.05, 0, kInk, kSolid, 0, 0, n, opts.data(), 0.6, text_scale, 2.2, 0.0, text_colours.data(),
           text_ptrs.data(), nullptr, nullptr, nullptr, nullptr, colours.data(), styles.data(), widths.data(),
           symbol_colours.data(), symbol_scales.data(), symbol_numbers.data(), symbol_ptrs.data());
}

void draw_page(const std::vector<RunMetrics>& runs, const std::string& title) {
  pladv(0);
  plvpor(0.0, 1.0, 0.0, 1.0);
  plwind(0.0, 1.0, 0.0, 1.0);
  plcol0(kInk);
  plschr(0.0, 0.85);
  plptex(0.5, 1.0 - kTitleHeight * 0.45, 1.0, 0.0, 0.5, plplot_text(title).c_str());
  plschr(0.0, kTextScale);
  plssym(0.0, 0.5);
  plslabelfunc(tick_label, nullptr);
  const Range x = step_range(runs);
  loss_panel(runs, x, panel(0, 0));
  series_panel(runs, x, panel(1, 0), &RunMetrics::lr, "Learning rate", "learning rate", false, true);
  series_panel(runs, x, panel(2, 0), &RunMetrics::grad_norm, "Gradient norm before clipping", "global L2 norm",
               true, true);
  series_panel(runs, x, panel(0, 1), &RunMetrics::tokens_per_s, "Throughput", "tokens/s", false, true);
  memory_panel(runs, x, panel(1, 1));
  legend_panel(runs, panel(2, 1));
}

const char* device_of(ImageFormat format) { return format == ImageFormat::Png ? "pngcairo" : "svg"; }

}  // namespace

void check_plot_device(ImageFormat format) {
  constexpr int kMaxDevices = 128;
  const char* menu_array[kMaxDevices] = {};
  const char* name_array[kMaxDevices] = {};
  const char** menus = menu_array;
  const char** names = name_array;
  int count = kMaxDevices;
  plgDevs(&menus, &names, &count);  // all devices: the svg driver calls itself interactive
  const std::string want = device_of(format);
  for (int i = 0; i < count; ++i)
    if (names[i] != nullptr && want == names[i]) return;
  GPT_FAIL("report: PLplot has no '{}' output device; install {} (scripts/install_deps.sh does)", want,
           format == ImageFormat::Png ? "the Debian package plplot-driver-cairo" : "PLplot's drivers (libplplot17)");
}

void draw_report(const std::vector<RunMetrics>& runs, const std::string& title, const std::string& path,
                 ImageFormat format) {
  GPT_CHECK(!runs.empty(), "report: no runs to draw");
  check_plot_device(format);
  {
    // PLplot reports a file it cannot open by ending the process; found out here, it is an error.
    std::ofstream probe(path, std::ios::binary | std::ios::trunc);
    GPT_CHECK(probe.is_open(), "report: cannot write '{}': {}", path, std::strerror(errno));
  }
  plsexit(throw_on_plplot_exit);
  plsabort(record_plplot_abort);
  plplot_aborts().clear();
  PLINT previous = 0, stream = 0;
  plgstrm(&previous);
  plmkstrm(&stream);
  try {
    plsdev(device_of(format));
    plsfnam(path.c_str());
    plspage(0.0, 0.0, kReportWidth, kReportHeight, 0, 0);
    std::vector<PLINT> r = {255, 0, 190}, g = {255, 0, 190}, b = {255, 0, 190};  // background, ink, grid
    for (const Rgb& c : kRunColours) {
      r.push_back(c.r);
      g.push_back(c.g);
      b.push_back(c.b);
    }
    plscmap0(r.data(), g.data(), b.data(), static_cast<PLINT>(r.size()));
    plinit();
    draw_page(runs, title);
    plend1();
  } catch (...) {
    plplot_aborts().clear();
    plsstrm(stream);
    plend1();
    plsstrm(previous);
    throw;
  }
  plsstrm(previous);
  GPT_CHECK(plplot_aborts().empty(), "report: PLplot could not draw all of '{}': {}", path,
            fmt::join(plplot_aborts(), "; "));
}

}  // namespace gpt
