// Progress of a long operation (prepare, export, evaluation) on stderr: how much is done, the rate, and the time left.
//
// On a terminal one status line is rewritten in place ("\r"), at most once per interval, so a fast loop
// costs a clock read per update and the terminal a line a second; where stderr is a pipe or a file (CI
// logs, `2> log`) nothing is written until the end, since a hundred rewritten lines there are noise. The
// final summary line is written in both cases.
//
// Rate and ETA are over the whole operation so far (done / elapsed; ETA = (total - done) / rate): the
// operations measured here go at a steady pace, and an average over everything done is the estimate that
// jitters least.
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>

namespace gpt {

// "0.4s", "42s", "3m07s", "2h05m".
std::string duration_text(double seconds);

// What is counted: bytes print as kB/MB/GB (decimal, so rates read as MB/s); other units as a count with
// k/M/G and the unit's name ("1.23M tokens").
enum class ProgressUnit { Bytes, Tokens, Items };
std::string amount_text(double amount, ProgressUnit unit);

class Progress {
 public:
  using Clock = std::function<double()>;  // seconds on a monotonic clock

  struct Options {
    double interval_s = 1.0;        // the least time between two status lines
    std::optional<bool> terminal;   // whether to show status lines; unset: isatty(stderr)
    Clock clock;                    // unset: std::chrono::steady_clock
    std::ostream* out = nullptr;    // unset: std::cerr
  };

  // total 0: unknown, so no percentage and no ETA.
  Progress(std::string what, ProgressUnit unit, uint64_t total, Options options);
  Progress(std::string what, ProgressUnit unit, uint64_t total) : Progress(std::move(what), unit, total, Options{}) {}

  void update(uint64_t done);  // how much is done in all (not an increment)
  void add(uint64_t amount) { update(done_ + amount); }

  // Ends the status line and writes "<what>: <summary> in <time> (<rate>)".
  void finish(std::string_view summary);
  // Ends the status line and writes nothing: for an operation whose result its caller logs itself.
  void clear();

  uint64_t done() const { return done_; }
  double elapsed_s() const;
  double rate() const;                  // units per second; 0 until time has passed
  std::optional<double> eta_s() const;  // nullopt when the total is unknown or nothing is done yet
  std::string status_line() const;      // "prepare: 12.3 MB of 45.6 MB (27%), 5.10 MB/s, eta 6s"

 private:
  std::string what_;
  ProgressUnit unit_;
  uint64_t total_;
  double interval_s_;
  bool terminal_;
  Clock clock_;
  std::ostream* out_;
  double start_;
  double last_shown_;
  bool shown_ = false;
  uint64_t done_ = 0;
};

}  // namespace gpt
