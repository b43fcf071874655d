#include "train/contention.h"

#include <gtest/gtest.h>

namespace gpt {
namespace {

TEST(Contention, AWindowShowsItWhenTheThreadsWaitedForCoresAndWerePreempted) {
  // 2 threads over 10 s: 19 CPU seconds is a dedicated machine, 6 a shared one.
  EXPECT_FALSE(shows_contention({10.0, 19.0, 30}, 2));
  EXPECT_TRUE(shows_contention({10.0, 6.0, 3000}, 2));
  // Little CPU but hardly preempted: the threads were idle (waiting for I/O), not crowded out.
  EXPECT_FALSE(shows_contention({10.0, 6.0, 50}, 2));
  // Waiting on I/O at the preemption rate an idle machine showed (51 a second): still not crowded out.
  EXPECT_FALSE(shows_contention({10.0, 6.0, 510}, 2));
  // One `yes > /dev/null` beside 2 threads on 2 cores: 2/3 of the cores, preempted hundreds of times a second.
  EXPECT_TRUE(shows_contention({10.0, 13.3, 2500}, 2));
  // Preempted often, yet given the cores: a busy but not crowded machine.
  EXPECT_FALSE(shows_contention({10.0, 18.0, 3000}, 2));
  EXPECT_FALSE(shows_contention({0.0, 0.0, 0}, 2));
}

// A clock the test moves: each step takes `step_s` of wall time and gets `cpu_per_step_s` of CPU and
// `preemptions_per_step` preemptions.
struct ScriptedUsage {
  double step_s = 0.1;
  double cpu_per_step_s = 0.2;
  int64_t preemptions_per_step = 1;
  int readings = 0;
  UsageReading now;
  void step() {
    now.wall_s += step_s;
    now.cpu_s += cpu_per_step_s;
    now.preemptions += preemptions_per_step;
  }
};

TEST(Contention, TheMonitorLooksOncePerWindowAndWarnsOnce) {
  ScriptedUsage usage;
  ContentionMonitor monitor(2, [&usage] {
    ++usage.readings;
    return usage.now;
  });
  EXPECT_EQ(usage.readings, 1);
  // Two dedicated cores, preempted 10 times a second: quiet, and read only at the end of each window.
  for (int i = 0; i < 2 * ContentionMonitor::kWindowSteps; ++i) {
    usage.step();
    EXPECT_FALSE(monitor.after_step().has_value());
  }
  EXPECT_EQ(usage.readings, 3);
  // Then a third of the cores and 300 preemptions a second: the window that shows it warns, naming the share.
  usage.cpu_per_step_s = 0.066;
  usage.preemptions_per_step = 30;
  std::optional<std::string> warning;
  for (int i = 0; i < ContentionMonitor::kWindowSteps && !warning; ++i) {
    usage.step();
    warning = monitor.after_step();
  }
  ASSERT_TRUE(warning.has_value());
  EXPECT_NE(warning->find("got 33% of their cores"), std::string::npos) << *warning;
  EXPECT_NE(warning->find("300 times a second"), std::string::npos) << *warning;
  // Once only: a user told once does not need it every window.
  for (int i = 0; i < 2 * ContentionMonitor::kWindowSteps; ++i) {
    usage.step();
    EXPECT_FALSE(monitor.after_step().has_value());
  }
}

TEST(Contention, AWindowTooShortToJudgeGrowsUntilItIsLongEnough) {
  // Fast steps on a crowded machine: 1 ms each, a third of the cores. 20 steps span 20 ms, in which one
  // preemption would already read as 50 a second, so the monitor waits for kMinWindowS of steps.
  ScriptedUsage usage{0.001, 0.00066, 1};
  ContentionMonitor monitor(2, [&usage] { return usage.now; });
  const int steps_to_judge = static_cast<int>(ContentionMonitor::kMinWindowS / usage.step_s);
  int warned_at = 0;
  for (int i = 1; i <= 2 * steps_to_judge && warned_at == 0; ++i) {
    usage.step();
    if (monitor.after_step().has_value()) warned_at = i;
  }
  EXPECT_GE(warned_at, steps_to_judge - 1);
  EXPECT_LE(warned_at, steps_to_judge + 1);
}

}  // namespace
}  // namespace gpt
