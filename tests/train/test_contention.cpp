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
  // One `yes > /dev/null` beside 2 threads on 2 cores: 2/3 of the cores, preempted hundreds of times a second.
  EXPECT_TRUE(shows_contention({10.0, 13.3, 2500}, 2));
  // Preempted often, yet given the cores: a busy but not crowded machine.
  EXPECT_FALSE(shows_contention({10.0, 18.0, 3000}, 2));
  EXPECT_FALSE(shows_contention({0.0, 0.0, 0}, 2));
}

TEST(Contention, TheMonitorLooksOncePerWindow) {
  ContentionMonitor monitor(1);
  // A quiet process (this test) never shows contention; the first kWindowSteps - 1 steps are not even looked at.
  for (int i = 0; i < 3 * ContentionMonitor::kWindowSteps; ++i) EXPECT_FALSE(monitor.after_step().has_value());
}

}  // namespace
}  // namespace gpt
