// Dynamic loss scaling: an overflowed step is skipped and backs the scale off, a run of growth_interval
// good steps grows it, the bounds hold, static mode never changes the scale, and the state restores.
#include "precision/loss_scaler.h"

#include "core/error.h"

#include <gtest/gtest.h>

namespace gpt {
namespace {

LossScalerConfig small_config() {
  LossScalerConfig c;
  c.initial_scale = 1024.0;
  c.growth_factor = 2.0;
  c.backoff_factor = 0.5;
  c.growth_interval = 3;
  c.min_scale = 1.0;
  c.max_scale = 4096.0;
  return c;
}

TEST(LossScaler, OverflowSkipsTheStepAndBacksOff) {
  LossScaler s(small_config());
  EXPECT_EQ(s.scale(), 1024.0f);
  EXPECT_TRUE(s.update(true));
  EXPECT_TRUE(s.update(true));
  EXPECT_EQ(s.state().good_steps, 2);
  EXPECT_FALSE(s.update(false)) << "an overflowed step must be skipped";
  EXPECT_EQ(s.scale(), 512.0f);
  EXPECT_EQ(s.inverse_scale(), 1.0f / 512.0f);
  EXPECT_EQ(s.state().good_steps, 0) << "an overflow restarts the run of good steps";
  EXPECT_EQ(s.state().skipped_steps, 1);
  EXPECT_FALSE(s.update(false));
  EXPECT_EQ(s.scale(), 256.0f);
  EXPECT_EQ(s.state().consecutive_skips, 2);
  EXPECT_TRUE(s.update(true));
  EXPECT_EQ(s.state().consecutive_skips, 0);
  EXPECT_EQ(s.state().skipped_steps, 2);
}

TEST(LossScaler, GoodStepsGrowTheScaleEveryInterval) {
  LossScaler s(small_config());
  for (int step = 1; step <= 9; ++step) {
    EXPECT_TRUE(s.update(true));
    const float want = 1024.0f * static_cast<float>(1 << (step / 3));
    EXPECT_EQ(s.scale(), std::min(want, 4096.0f)) << "after step " << step;
  }
  EXPECT_EQ(s.scale(), 4096.0f) << "max_scale caps the growth";
}

TEST(LossScaler, BackoffStopsAtMinScale) {
  LossScalerConfig c = small_config();
  c.initial_scale = 4.0;
  LossScaler s(c);
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(s.update(false));
  EXPECT_EQ(s.scale(), 1.0f);
  EXPECT_EQ(s.state().consecutive_skips, 5);
}

TEST(LossScaler, StaticScaleNeverChanges) {
  LossScalerConfig c = small_config();
  c.dynamic = false;
  c.initial_scale = 128.0;
  LossScaler s(c);
  for (int i = 0; i < 10; ++i) EXPECT_TRUE(s.update(true));
  EXPECT_FALSE(s.update(false)) << "static scaling still skips an overflowed step";
  for (int i = 0; i < 10; ++i) s.update(i % 3 != 0);
  EXPECT_EQ(s.scale(), 128.0f);
}

TEST(LossScaler, StateRestoresExactly) {
  LossScaler a(small_config());
  a.update(true);
  a.update(false);
  a.update(true);
  LossScaler b(small_config());
  b.load_state(a.state());
  EXPECT_EQ(b.state(), a.state());
  for (bool finite : {true, true, false, true, true, true, true}) {
    EXPECT_EQ(a.update(finite), b.update(finite));
    EXPECT_EQ(a.state(), b.state());
  }
  LossScalerState bad = a.state();
  bad.scale = 0.0f;
  EXPECT_THROW(b.load_state(bad), Error);
}

TEST(LossScaler, RejectsImpossibleConfig) {
  auto rejects = [](auto edit) {
    LossScalerConfig c;
    edit(c);
    EXPECT_THROW(c.validate(), Error);
    EXPECT_THROW(LossScaler{c}, Error);
  };
  rejects([](LossScalerConfig& c) { c.initial_scale = 0; });
  rejects([](LossScalerConfig& c) { c.growth_factor = 1.0; });
  rejects([](LossScalerConfig& c) { c.backoff_factor = 1.0; });
  rejects([](LossScalerConfig& c) { c.growth_interval = 0; });
  rejects([](LossScalerConfig& c) { c.min_scale = 2e7; });
  LossScalerConfig ok;
  EXPECT_NO_THROW(ok.validate());
}

}  // namespace
}  // namespace gpt
