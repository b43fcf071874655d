// `gpt-train bench` times the trainer's own step: for one config, the bench's steps (BenchSession) and
// the trainer's steps on the same batches give the same losses, gradient norms, learning rates, loss
// scales and final weights, bit for bit, with accumulation derived from train.global_batch_tokens, with
// dropout, and under the recipes that carry state from step to step (fp16's loss scaler, fp8's scales).
#include "bench/bench_session.h"
#include "train/step_runner.h"
#include "train/trainer.h"

#include "config/config_loader.h"
#include "data/loader.h"
#include "synthetic_run.h"

#include <gtest/gtest.h>

#include <bit>
#include <string>
#include <vector>

namespace gpt::test {
namespace {

constexpr int kSteps = 3;

Config step_config(const TempDir& dir, const std::string& recipe) {
  Config c = synthetic_run(dir, permutation_pattern(), 4000, false);
  c.model = tiny_model(16, 2, 24, 2, 16);
  c.model.dropout = 0.1;
  c.train.batch_size = 4;
  c.train.seq_len = 13;
  c.train.global_batch_tokens = 2 * 4 * 13;  // two micro-batches per step, derived
  c.train.steps = kSteps;
  c.precision.recipe = recipe;
  return c;
}

void expect_bench_steps_are_the_trainers(const Config& c) {
  Trainer trainer(c, config_to_yaml(c));
  bench::BenchSession bench(c);
  const TrainConfig& t = trainer.config().train;
  ASSERT_EQ(t.grad_accum_steps, 2);
  ASSERT_EQ(bench.config().train.grad_accum_steps, t.grad_accum_steps);
  ASSERT_EQ(bench.tokens_per_step(), static_cast<int64_t>(t.grad_accum_steps) * t.batch_size * t.seq_len);

  // The batches the trainer's loader would draw: the bench's loader has the same options.
  DataLoader loader({c.data.train, t.batch_size, t.seq_len, c.model.vocab_size, true, t.seed, 0, 1});
  const size_t micro = static_cast<size_t>(t.batch_size) * t.seq_len;
  std::vector<int32_t> inputs(micro * t.grad_accum_steps), targets(inputs.size());
  for (int s = 0; s < kSteps; ++s) {
    for (int k = 0; k < t.grad_accum_steps; ++k)
      loader.next_batch(std::span(inputs).subspan(k * micro, micro), std::span(targets).subspan(k * micro, micro));
    const StepResult a = trainer.train_step(inputs, targets);
    const StepResult b = bench.step();
    EXPECT_EQ(a.step, s + 1);
    EXPECT_EQ(b.step, s + 1);
    EXPECT_EQ(std::bit_cast<uint64_t>(a.loss), std::bit_cast<uint64_t>(b.loss)) << "step " << s << ": " << a.loss
                                                                                << " vs " << b.loss;
    EXPECT_EQ(std::bit_cast<uint64_t>(a.grad_norm), std::bit_cast<uint64_t>(b.grad_norm))
        << "step " << s << ": " << a.grad_norm << " vs " << b.grad_norm;
    EXPECT_EQ(a.lr, b.lr);
    EXPECT_EQ(a.target_tokens, b.target_tokens);
    EXPECT_EQ(a.loss_scale, b.loss_scale);
    EXPECT_EQ(a.applied, b.applied);
    EXPECT_EQ(a.fp8.values, b.fp8.values);
    EXPECT_EQ(a.fp8.amax_max, b.fp8.amax_max);
  }
  EXPECT_EQ(trainer.model().parameters_to_host(), bench.model().parameters_to_host());
}

TEST(StepRunner, BenchStepsAreTheTrainersFp32) {
  TempDir dir;
  expect_bench_steps_are_the_trainers(step_config(dir, "fp32"));
}

// The loss scaler is part of the step: the bench scales the loss and unscales the norm as training does.
TEST(StepRunner, BenchStepsAreTheTrainersFp16WithLossScaling) {
  TempDir dir;
  Config c = step_config(dir, "fp16");
  c.precision.loss_scale_initial = 1024.0;
  expect_bench_steps_are_the_trainers(c);
}

TEST(StepRunner, BenchStepsAreTheTrainersFp8) {
  TempDir dir;
  Config c = step_config(dir, "fp8");
  c.precision.fp8_backward = "e5m2";
  expect_bench_steps_are_the_trainers(c);
}

TEST(StepRunner, GlobalBatchTokensMustBeAMultipleOfTheMicroStep) {
  TrainConfig t;
  t.batch_size = 4;
  t.seq_len = 13;
  t.global_batch_tokens = 4 * 13 * 2 * 3;
  resolve_accumulation(t, 2);
  EXPECT_EQ(t.grad_accum_steps, 3);
  t.global_batch_tokens = 100;
  const std::string message = error_message([&] { resolve_accumulation(t, 2); });
  EXPECT_NE(message.find("train.global_batch_tokens = 100 is not a multiple of"), std::string::npos) << message;
  EXPECT_NE(message.find("104"), std::string::npos) << message;  // the multiple that would do
}

}  // namespace
}  // namespace gpt::test
