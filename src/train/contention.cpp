#include "train/contention.h"

#include <fmt/format.h>

#include <spdlog/spdlog.h>

#include <chrono>
#include <fstream>
#include <thread>

#include <sys/resource.h>

namespace gpt {
namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void usage(double& cpu_s, int64_t& preemptions) {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  cpu_s = static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
          1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
  preemptions = u.ru_nivcsw;
}

std::string load_average() {
  std::ifstream in("/proc/loadavg");
  double one = 0.0;
  return in >> one ? fmt::format("; the load average is {:.1f} on {} cores", one, std::thread::hardware_concurrency())
                   : std::string();
}

}  // namespace

bool shows_contention(const ContentionSample& window, int threads) {
  if (window.wall_s <= 0.0 || threads < 1) return false;
  const double share = window.cpu_s / (window.wall_s * threads);
  // One other busy process on as many cores as threads leaves the threads n/(n+1) of them (2/3 on 2 cores,
  // where it made demo steps 2-15x slower), so the share bound sits above 2/3. The share alone would also
  // flag a run that waits on I/O or runs serial code between its loops; the preemption rate is what tells
  // a crowded machine (hundreds a second when it was: 287 at a load of 15.6, 773 with `yes` beside a load
  // of 6) from an idle one (a few a second).
  return share < 0.8 && static_cast<double>(window.preemptions) / window.wall_s > 20.0;
}

ContentionMonitor::ContentionMonitor(int threads) : threads_(threads), wall_start_s_(now_s()) {
  usage(cpu_start_s_, preemptions_start_);
}

std::optional<std::string> ContentionMonitor::after_step() {
  if (warned_ || ++steps_ < kWindowSteps) return std::nullopt;
  // The window is wall-clock time, so what runs between steps (evaluation, samples, checkpoints) counts in
  // both its time and its usage.
  ContentionSample window;
  const double wall_s = now_s();
  double cpu_s = 0.0;
  int64_t preemptions = 0;
  usage(cpu_s, preemptions);
  window.wall_s = wall_s - wall_start_s_;
  window.cpu_s = cpu_s - cpu_start_s_;
  window.preemptions = preemptions - preemptions_start_;
  steps_ = 0;
  wall_start_s_ = wall_s;
  cpu_start_s_ = cpu_s;
  preemptions_start_ = preemptions;
  spdlog::debug("cores: {} threads got {:.0f}% of their cores over {:.2f} s, {:.0f} preemptions a second", threads_,
                100.0 * window.cpu_s / (window.wall_s * threads_), window.wall_s,
                static_cast<double>(window.preemptions) / window.wall_s);
  if (!shows_contention(window, threads_)) return std::nullopt;
  warned_ = true;
  return fmt::format(
      "the cores are shared: over the last {} steps this run's {} threads got {:.0f}% of their cores and were "
      "preempted {:.0f} times a second{}. Steps are slower and uneven while other processes run; fewer threads "
      "(train.threads, or OMP_NUM_THREADS) than cores left free, or a quieter machine, give steadier steps",
      kWindowSteps, threads_, 100.0 * window.cpu_s / (window.wall_s * threads_),
      static_cast<double>(window.preemptions) / window.wall_s, load_average());
}

}  // namespace gpt
