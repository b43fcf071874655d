#include "train/trainer.h"

#include "config/config_loader.h"
#include "synthetic_run.h"

#include <gtest/gtest.h>

#include <cmath>

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

// Resuming from a checkpoint continues exactly: 3 steps, a new process-equivalent Trainer resuming for
// 3 more, equals 6 uninterrupted steps bit for bit on the CPU.
TEST(TrainerResume, ResumeEqualsUninterruptedRun) {
  TempDir dir;
  Config c = synthetic_run(dir, {1, 4, 2, 8, 5, 7, 3, 3, 9, 0, 11, 6, 2, 13, 15, 1, 10}, 30000);
  c.model.dropout = 0.1;
  c.train.steps = 6;
  Trainer straight(c, config_to_yaml(c));
  straight.run();

  Config first = c;
  first.train.steps = 3;
  first.log.run_dir = dir.file("run_resumed");
  Config second = first;
  second.train.steps = 6;
  second.train.resume = true;
  {
    Trainer t(first, config_to_yaml(first));
    t.run();
  }
  Trainer resumed(second, config_to_yaml(second));
  EXPECT_EQ(resumed.step(), 3);
  resumed.run();
  EXPECT_EQ(resumed.model().parameters_to_host(), straight.model().parameters_to_host());
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
