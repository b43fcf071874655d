#include "core/progress.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>

#include <unistd.h>

namespace gpt {
namespace {

double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Three significant digits with a decimal prefix: 999, 1.23k, 45.6M.
std::string scaled(double value, const char* const (&prefixes)[4]) {
  int p = 0;
  while (p < 3 && std::abs(value) >= 999.5) {
    value /= 1000.0;
    ++p;
  }
  if (p == 0) return fmt::format("{:.0f}{}", value, prefixes[0]);
  return fmt::format("{:.3g}{}", value, prefixes[p]);
}

}  // namespace

std::string duration_text(double seconds) {
  if (seconds < 9.95) return fmt::format("{:.1f}s", std::max(0.0, seconds));
  const auto s = static_cast<int64_t>(std::llround(std::max(0.0, seconds)));
  if (s >= 3600) return fmt::format("{}h{:02d}m", s / 3600, (s % 3600) / 60);
  if (s >= 60) return fmt::format("{}m{:02d}s", s / 60, s % 60);
  return fmt::format("{}s", s);
}

std::string amount_text(double amount, ProgressUnit unit) {
  static const char* const kBytes[4] = {" B", " kB", " MB", " GB"};
  static const char* const kCount[4] = {"", "k", "M", "G"};
  switch (unit) {
    case ProgressUnit::Bytes: return scaled(amount, kBytes);
    case ProgressUnit::Tokens: return scaled(amount, kCount) + " tokens";
    case ProgressUnit::Items: return scaled(amount, kCount);
  }
  return scaled(amount, kCount);
}

Progress::Progress(std::string what, ProgressUnit unit, uint64_t total, Options options)
    : what_(std::move(what)),
      unit_(unit),
      total_(total),
      interval_s_(options.interval_s),
      terminal_(options.terminal.value_or(::isatty(STDERR_FILENO) == 1)),
      clock_(options.clock ? std::move(options.clock) : Clock(steady_seconds)),
      out_(options.out != nullptr ? options.out : &std::cerr),
      start_(clock_()),
      last_shown_(start_) {}

double Progress::elapsed_s() const { return std::max(0.0, clock_() - start_); }

double Progress::rate() const {
  const double elapsed = elapsed_s();
  return elapsed > 0.0 ? static_cast<double>(done_) / elapsed : 0.0;
}

std::optional<double> Progress::eta_s() const {
  const double r = rate();
  if (total_ == 0 || done_ == 0 || r <= 0.0) return std::nullopt;
  return static_cast<double>(total_ - std::min(done_, total_)) / r;
}

std::string Progress::status_line() const {
  std::string line = fmt::format("{}: {}", what_, amount_text(static_cast<double>(done_), unit_));
  if (total_ > 0)
    line += fmt::format(" of {} ({:.0f}%)", amount_text(static_cast<double>(total_), unit_),
                        100.0 * static_cast<double>(std::min(done_, total_)) / static_cast<double>(total_));
  line += fmt::format(", {}/s", amount_text(rate(), unit_));
  if (const auto eta = eta_s()) line += ", eta " + duration_text(*eta);
  return line;
}

void Progress::update(uint64_t done) {
  done_ = done;
  if (!terminal_) return;
  const double now = clock_();
  if (now - last_shown_ < interval_s_) return;
  last_shown_ = now;
  shown_ = true;
  // "\x1b[K" clears what a longer earlier line left to the right.
  *out_ << '\r' << status_line() << "\x1b[K" << std::flush;
}

void Progress::clear() {
  if (shown_) *out_ << "\r\x1b[K" << std::flush;
  shown_ = false;
}

void Progress::finish(std::string_view summary) {
  if (shown_) *out_ << "\r\x1b[K";
  *out_ << fmt::format("{}: {} in {} ({}/s)\n", what_, summary, duration_text(elapsed_s()),
                       amount_text(rate(), unit_))
        << std::flush;
  shown_ = false;
}

}  // namespace gpt
