// Noticing that the cores are shared. A step whose threads wait for a core another process holds takes
// several times as long, and a user who sees only slow steps does not know why. Over windows of steps this
// watches how much CPU time the process got against what its threads could have used, and how often the
// scheduler took a core away from it (involuntary context switches, getrusage), and says so once.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace gpt {

struct ContentionSample {
  double wall_s = 0.0;          // the window's length
  double cpu_s = 0.0;           // CPU time of the process over the window (user + system)
  int64_t preemptions = 0;      // involuntary context switches over the window
};

// Whether a window shows the cores contended: the threads got under 80% of the cores they run on and were
// preempted more than 100 times a second (an idle 2-core machine showed 31-51, a crowded one hundreds).
bool shows_contention(const ContentionSample& window, int threads);

// The process's usage since some fixed origin: `wall_s` on a steady clock, `cpu_s` and `preemptions` from
// getrusage. The monitor judges the differences between two readings.
using UsageReading = ContentionSample;
UsageReading read_process_usage();

class ContentionMonitor {
 public:
  static constexpr int kWindowSteps = 20;
  // A window is judged only once it spans this long: over a few milliseconds of fast steps, one preemption
  // is already "hundreds a second" and the CPU clock's tick makes the share meaningless.
  static constexpr double kMinWindowS = 1.0;
  explicit ContentionMonitor(int threads, std::function<UsageReading()> read_usage = read_process_usage);
  // After each step: the warning, the first time a window shows contention.
  std::optional<std::string> after_step();

 private:
  int threads_;
  std::function<UsageReading()> read_usage_;
  bool warned_ = false;
  int steps_ = 0;
  UsageReading start_;
};

}  // namespace gpt
