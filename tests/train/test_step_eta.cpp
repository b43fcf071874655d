#include "train/step_eta.h"

#include <gtest/gtest.h>

namespace gpt::test {
namespace {

// Slow first steps (a cold start, or another process on the cores) then fast ones: the ETA follows the
// window of recent steps, where the average since the start would still be near the slow rate.
TEST(StepEta, FollowsTheRecentStepsNotTheAverageSinceTheStart) {
  StepEta eta(4);
  EXPECT_EQ(eta.seconds_left(10), 0.0);
  for (int i = 0; i < 20; ++i) eta.add_step_ms(1000.0);
  EXPECT_DOUBLE_EQ(eta.seconds_left(10), 10.0);
  eta.add_step_ms(100.0);
  eta.add_step_ms(100.0);
  EXPECT_DOUBLE_EQ(eta.seconds_left(10), 5.5);  // (1000 + 1000 + 100 + 100) / 4 ms per step
  eta.add_step_ms(100.0);
  eta.add_step_ms(100.0);
  EXPECT_DOUBLE_EQ(eta.seconds_left(10), 1.0);  // the slow steps have left the window
  EXPECT_EQ(eta.seconds_left(0), 0.0);
}

}  // namespace
}  // namespace gpt::test
