#include "train/trainer.h"

#include "config/config_loader.h"
#include "synthetic_run.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

namespace gpt::test {
namespace {

// End to end: on a sequence where every token determines the next, a tiny model drives the loss to
// near zero within a few hundred steps.
TEST(TrainerEndToEnd, RepeatingSequenceLossGoesToZero) {
  TempDir dir;
  Config c = synthetic_run(dir, permutation_pattern(), 20000);
  c.train.steps = 250;
  c.train.eval_every = 250;
  Trainer trainer(c, config_to_yaml(c));
  TrainSummary summary = trainer.run();
  EXPECT_EQ(summary.steps_done, 250);
  EXPECT_LT(summary.last_loss, 0.05);
  ASSERT_TRUE(summary.last_val_loss.has_value());
  EXPECT_LT(*summary.last_val_loss, 0.05);
}

// K micro-batches of B and one batch of K*B see the same samples (the loader's global stream) and give
// the same losses and weights after several optimizer steps; float sums run in another order, so the
// comparison has a tolerance.
TEST(TrainerAccumulation, FourMicroBatchesTrainLikeOneBigBatch) {
  TempDir dir;
  Config small = synthetic_run(dir, {1, 4, 2, 8, 5, 7, 3, 3, 9, 0, 11, 6, 2, 13, 15, 1, 10}, 30000);
  small.train.batch_size = 2;
  small.train.grad_accum_steps = 4;
  Config big = small;
  big.train.batch_size = 8;
  big.train.grad_accum_steps = 1;
  big.log.run_dir = dir.file("run_big");

  Trainer a(small, config_to_yaml(small)), b(big, config_to_yaml(big));
  std::vector<double> loss_a, loss_b;
  a.run();
  b.run();
  std::vector<float> pa = a.model().parameters_to_host(), pb = b.model().parameters_to_host();
  double max_diff = 0.0, max_abs = 0.0;
  for (size_t i = 0; i < pa.size(); ++i) {
    max_diff = std::max(max_diff, std::abs(double(pa[i]) - pb[i]));
    max_abs = std::max(max_abs, std::abs(double(pb[i])));
  }
  EXPECT_LT(max_diff / max_abs, 1e-4);
}

// Trains c for its steps in one go (in c.log.run_dir), and for half of them then a resume for the rest (in
// resumed_dir), each part a fresh Trainer as a new process would be: the resume starts where the first part
// stopped and ends with the uninterrupted run's weights, bit for bit.
void expect_resume_equals_uninterrupted(const Config& c, const std::string& resumed_dir) {
  Trainer straight(c, config_to_yaml(c));
  straight.run();
  Config first = c;
  first.train.steps = c.train.steps / 2;
  first.log.run_dir = resumed_dir;
  Config second = first;
  second.train.steps = c.train.steps;
  second.train.resume = true;
  {
    Trainer t(first, config_to_yaml(first));
    t.run();
  }
  Trainer resumed(second, config_to_yaml(second));
  EXPECT_EQ(resumed.step(), first.train.steps);
  resumed.run();
  EXPECT_EQ(resumed.model().parameters_to_host(), straight.model().parameters_to_host());
}

// Resuming from a checkpoint continues exactly: 3 steps, a new process-equivalent Trainer resuming for
// 3 more, equals 6 uninterrupted steps bit for bit on the CPU.
TEST(TrainerResume, ResumeEqualsUninterruptedRun) {
  TempDir dir;
  Config c = synthetic_run(dir, {1, 4, 2, 8, 5, 7, 3, 3, 9, 0, 11, 6, 2, 13, 15, 1, 10}, 30000);
  c.model.dropout = 0.1;
  c.train.steps = 6;
  expect_resume_equals_uninterrupted(c, dir.file("run_resumed"));
}

// Resume is exact under every recipe and with recomputation: the loss scaler (growing every 2 steps
// here) and the FP8 scales and amax histories travel in the checkpoint, so 3 + 3 steps log the same
// losses and end with the same weights as 6 steps, bit for bit.
TEST(TrainerResume, EachRecipeAndRecomputeModeResumesBitwise) {
  TempDir dir;
  const Config base = synthetic_run(dir, {1, 4, 2, 8, 5, 7, 3, 3, 9, 0, 11, 6, 2, 13, 15, 1, 10}, 30000, false);
  struct Variant {
    std::string name, recipe, recompute, fp8_backward, fp8_scaling;
  };
  const std::vector<Variant> variants = {{"fp32 full every 2", "fp32", "full", "bf16", "delayed"},
                                         {"bf16 selective", "bf16", "selective", "bf16", "delayed"},
                                         {"fp16", "fp16", "none", "bf16", "delayed"},
                                         {"fp8 delayed e5m2 full", "fp8", "full", "e5m2", "delayed"},
                                         {"fp8 current", "fp8", "none", "bf16", "current"}};
  for (const Variant& v : variants) {
    SCOPED_TRACE(v.name);
    Config c = base;
    c.model.dropout = 0.1;
    c.train.steps = 6;
    c.precision.recipe = v.recipe;
    c.precision.loss_scale_initial = 1024.0;
    c.precision.loss_scale_growth_interval = 2;
    c.precision.fp8_backward = v.fp8_backward;
    c.precision.fp8_scaling = v.fp8_scaling;
    c.precision.fp8_amax_history = 4;
    c.recompute.mode = v.recompute;
    c.recompute.every = "2";
    const std::string index = std::to_string(&v - variants.data());
    c.log.run_dir = dir.file("straight_" + index);
    expect_resume_equals_uninterrupted(c, dir.file("resumed_" + index));
    const auto losses = logged_losses(c.log.run_dir);
    EXPECT_EQ(losses.size(), 6u);
    EXPECT_EQ(logged_losses(dir.file("resumed_" + index)), losses);
  }
}

TEST(TrainerStep, AllTargetsMaskedIsAnError) {
  TempDir dir;
  Config c = synthetic_run(dir, permutation_pattern(), 5000);
  Trainer trainer(c, config_to_yaml(c));
  std::vector<int32_t> inputs(8 * 16, 1), targets(8 * 16, -1);
  EXPECT_THROW(trainer.train_step(inputs, targets), Error);
}

}  // namespace
}  // namespace gpt::test
