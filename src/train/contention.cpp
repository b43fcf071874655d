#include "train/contention.h"

#include <fmt/format.h>

#include <spdlog/spdlog.h>

#include <chrono>
#include <fstream>
#include <thread>
#include <utility>

#include <sys/resource.h>

namespace gpt {
namespace {

std::string load_average() {
  std::ifstream in("/proc/loadavg");
  double one = 0.0;
  return in >> one ? fmt::format("; the load average is {:.1f} on {} cores", one, std::thread::hardware_concurrency())
                   : std::string();
}

}  // namespace

UsageReading read_process_usage() {
  UsageReading reading;
  reading.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  reading.cpu_s = static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
                  1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
  reading.preemptions = u.ru_nivcsw;
  return reading;
}

bool shows_contention(const ContentionSample& window, int threads) {
  if (window.wall_s <= 0.0 || threads < 1) return false;
  const double share = window.cpu_s / (window.wall_s * threads);
  // One other busy process on as many cores as threads leaves the threads n/(n+1) of them (2/3 on 2 cores,
  // where it made demo steps 2-15x slower), so the share bound sits above 2/3. The share alone would also
  // flag a run that waits on I/O or runs serial code between its loops; the preemption rate is what tells
  // a crowded machine (hundreds a second when it was: 287 at a load of 15.6, 773 with `yes` beside a load
  // of 6, 1291 with `yes` on an otherwise idle machine) from an idle one (31-51 a second in the demo on an
  // idle 2-core machine, the kernel's own housekeeping), so the bound sits at twice the idle figure.
  return share < 0.8 && static_cast<double>(window.preemptions) / window.wall_s > 100.0;
}

ContentionMonitor::ContentionMonitor(int threads, std::function<UsageReading()> read_usage)
    : threads_(threads), read_usage_(std::move(read_usage)), start_(read_usage_()) {}

std::optional<std::string> ContentionMonitor::after_step() {
  if (warned_ || ++steps_ < kWindowSteps) return std::nullopt;
  // The window is wall-clock time, so what runs between steps (evaluation, samples, checkpoints) counts in
  // both its time and its usage. A window too short to judge grows until it is long enough.
  const UsageReading now = read_usage_();
  ContentionSample window;
  window.wall_s = now.wall_s - start_.wall_s;
  if (window.wall_s < kMinWindowS) return std::nullopt;
  window.cpu_s = now.cpu_s - start_.cpu_s;
  window.preemptions = now.preemptions - start_.preemptions;
  steps_ = 0;
  start_ = now;
  spdlog::debug("cores: {} threads got {:.0f}% of their cores over {:.2f} s, {:.0f} preemptions a second", threads_,
                100.0 * window.cpu_s / (window.wall_s * threads_), window.wall_s,
                static_cast<double>(window.preemptions) / window.wall_s);
  if (!shows_contention(window, threads_)) return std::nullopt;
  warned_ = true;
  return fmt::format(
      "the cores are shared: over the last {:.1f} s this run's {} threads got {:.0f}% of their cores and were "
      "preempted {:.0f} times a second{}. Steps are slower and uneven while other processes run; fewer threads "
      "(train.threads, or OMP_NUM_THREADS) than cores left free, OMP_WAIT_POLICY=passive (idle threads sleep at "
      "once instead of spinning), or a quieter machine, give steadier steps",
      window.wall_s, threads_, 100.0 * window.cpu_s / (window.wall_s * threads_),
      static_cast<double>(window.preemptions) / window.wall_s, load_average());
}

}  // namespace gpt
