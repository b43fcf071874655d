// The bf16 and fp16 recipes end to end: they train a tiny model like FP32 does, and fp16's loss scaling
// skips an overflowed step and backs the scale off.
#include "train/trainer.h"

#include "config/config_loader.h"
#include "synthetic_run.h"

#include <gtest/gtest.h>

#include <cmath>

namespace gpt::test {
namespace {

// The repeating-sequence run under `recipe`, 150 steps.
Config repeating_run(const TempDir& dir, const std::string& recipe) {
  Config c = synthetic_run(dir, permutation_pattern(), 20000, false);
  c.train.steps = 150;
  c.log.run_dir = dir.file("run_" + recipe);
  c.precision.recipe = recipe;
  return c;
}

// A step's worth of the synthetic sequence, as the loader would give it.
void one_batch(const Config& c, std::vector<int32_t>& inputs, std::vector<int32_t>& targets) {
  const std::vector<int32_t> pattern = {3, 9, 0, 14, 7, 1, 12, 5, 10, 2, 15, 6, 11};
  const size_t n = static_cast<size_t>(c.train.batch_size) * c.train.seq_len * c.train.grad_accum_steps;
  inputs.resize(n);
  targets.resize(n);
  for (size_t i = 0; i < n; ++i) {
    inputs[i] = pattern[i % pattern.size()];
    targets[i] = pattern[(i + 1) % pattern.size()];
  }
}

// Same steps, same data: bf16 and fp16 reach a loss within 0.05 of FP32's (which is below 0.1 here) and
// stay finite (here all three end near 5e-4 after 150 steps).
TEST(MixedPrecision, Bf16AndFp16ConvergeLikeFp32) {
  TempDir dir;
  std::map<std::string, double> last;
  for (const std::string recipe : {"fp32", "bf16", "fp16"}) {
    SCOPED_TRACE(recipe);
    Config c = repeating_run(dir, recipe);
    Trainer trainer(c, config_to_yaml(c));
    const TrainSummary s = trainer.run();
    EXPECT_EQ(s.steps_done, c.train.steps);
    EXPECT_TRUE(std::isfinite(s.last_loss));
    last[recipe] = s.last_loss;
    std::cout << "[ recipe ] " << recipe << " loss after " << c.train.steps << " steps: " << s.last_loss << "\n";
  }
  EXPECT_LT(last["fp32"], 0.1);
  EXPECT_NEAR(last["bf16"], last["fp32"], 0.05);
  EXPECT_NEAR(last["fp16"], last["fp32"], 0.05);
}

// The rounding is real: a bf16 step's loss differs from FP32's in the low digits, not the leading ones.
TEST(MixedPrecision, Bf16StepRoundsButAgreesWithFp32) {
  TempDir dir;
  std::vector<int32_t> inputs, targets;
  Config c32 = repeating_run(dir, "fp32"), c16 = repeating_run(dir, "bf16");
  one_batch(c32, inputs, targets);
  Trainer a(c32, config_to_yaml(c32)), b(c16, config_to_yaml(c16));
  const StepResult ra = a.train_step(inputs, targets), rb = b.train_step(inputs, targets);
  EXPECT_NE(ra.loss, rb.loss);
  EXPECT_NEAR(ra.loss, rb.loss, 1e-2 * ra.loss);
  EXPECT_NEAR(ra.grad_norm, rb.grad_norm, 5e-2 * ra.grad_norm);
}

// fp16 at a scale of 2^30: the scaled loss gradient overflows FP16, the step is skipped (the masters are
// untouched) and the scale halves, until a step fits; the reported gradient norm is the unscaled one.
TEST(MixedPrecision, Fp16OverflowSkipsTheStepAndBacksOff) {
  TempDir dir;
  std::vector<int32_t> inputs, targets;
  Config c = repeating_run(dir, "fp16");
  c.precision.loss_scale_initial = 1073741824.0;  // 2^30
  one_batch(c, inputs, targets);
  Trainer trainer(c, config_to_yaml(c));
  const std::vector<float> before = trainer.model().parameters_to_host();

  const StepResult first = trainer.train_step(inputs, targets);
  EXPECT_TRUE(first.overflow);
  EXPECT_FALSE(first.applied);
  EXPECT_EQ(first.loss_scale, 1073741824.0);
  EXPECT_EQ(first.overflow_steps, 1);
  EXPECT_TRUE(first.nonfinite.empty());  // an overflow is not a divergence
  EXPECT_EQ(trainer.model().parameters_to_host(), before);

  StepResult r = first;
  int steps = 1;
  while (r.overflow && steps < 40) {
    r = trainer.train_step(inputs, targets);
    ++steps;
  }
  ASSERT_FALSE(r.overflow) << "still overflowing after " << steps << " steps";
  EXPECT_TRUE(r.applied);
  EXPECT_EQ(r.overflow_steps, steps - 1);
  EXPECT_EQ(r.loss_scale, 1073741824.0 / std::pow(2.0, steps - 1));
  EXPECT_LE(r.loss_scale / first.target_tokens, 65504.0);  // dloss = S/N fits FP16
  EXPECT_NE(trainer.model().parameters_to_host(), before);

  // The unscaled norm matches FP32's on the same weights and batch.
  Config c32 = repeating_run(dir, "fp32");
  Trainer reference(c32, config_to_yaml(c32));
  const StepResult r32 = reference.train_step(inputs, targets);
  Config again = c;
  again.precision.loss_scale_initial = r.loss_scale;
  again.log.run_dir = dir.file("run_again");
  Trainer fitted(again, config_to_yaml(again));
  const StepResult rf = fitted.train_step(inputs, targets);
  EXPECT_FALSE(rf.overflow);
  EXPECT_NEAR(rf.grad_norm, r32.grad_norm, 5e-2 * r32.grad_norm);
}

// A static scale is kept after an overflow (the step is still skipped).
TEST(MixedPrecision, Fp16StaticScaleSkipsButKeepsTheScale) {
  TempDir dir;
  std::vector<int32_t> inputs, targets;
  Config c = repeating_run(dir, "fp16");
  c.precision.loss_scale_initial = 1073741824.0;
  c.precision.loss_scale_static = true;
  one_batch(c, inputs, targets);
  Trainer trainer(c, config_to_yaml(c));
  for (int i = 1; i <= 2; ++i) {
    const StepResult r = trainer.train_step(inputs, targets);
    EXPECT_TRUE(r.overflow);
    EXPECT_FALSE(r.applied);
    EXPECT_EQ(r.loss_scale, 1073741824.0);
    EXPECT_EQ(r.overflow_steps, i);
  }
}

}  // namespace
}  // namespace gpt::test
