// The bf16 and fp16 recipes end to end: they train a tiny model like FP32 does, and fp16's loss scaling
// skips an overflowed step and backs the scale off.
#include "train/trainer.h"

#include "config/config_loader.h"
#include "synthetic_run.h"

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <fstream>
#include <iterator>

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

// Same steps, same data: bf16, fp16 and fp8 (delayed scaling with BF16 or E5M2 gradients, current
// scaling) reach a loss within 0.05 of FP32's (which is below 0.1 here) and stay finite.
TEST(MixedPrecision, EveryRecipeConvergesLikeFp32) {
  TempDir dir;
  std::map<std::string, double> last;
  for (const std::string recipe : {"fp32", "bf16", "fp16", "fp8", "fp8-e5m2", "fp8-current"}) {
    SCOPED_TRACE(recipe);
    Config c = repeating_run(dir, recipe);
    if (recipe.starts_with("fp8")) c.precision.recipe = "fp8";
    if (recipe == "fp8-e5m2") c.precision.fp8_backward = "e5m2";
    if (recipe == "fp8-current") c.precision.fp8_scaling = "current";
    c.train.threads = 1;  // as in EveryRecipeLearnsTextLikeFp32: too small to share between threads
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
  for (const char* fp8 : {"fp8", "fp8-e5m2", "fp8-current"}) EXPECT_NEAR(last[fp8], last["fp32"], 0.05) << fp8;
}

// Natural text as the demo trains on it (bytes of English; here tests/data/text/english_prose.txt, a frozen
// copy of an earlier README: no download, and no drift as the README grows): every recipe ends within 0.08 nats of FP32's validation loss after the same 500 steps, and finite; FP32 ends below
// the unigram baseline of the validation bytes. The tolerance is wider than on the repeating sequence: a
// tiny model on 35 kB of text is noisy (measured: bf16 +0.021, fp16 +0.033, fp8 +0.038, fp8 e5m2 +0.005).
TEST(MixedPrecision, EveryRecipeLearnsTextLikeFp32) {
  TempDir dir;
  std::ifstream prose(std::string(GPT_SOURCE_DIR) + "/tests/data/text/english_prose.txt", std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(prose)), std::istreambuf_iterator<char>());
  ASSERT_GT(text.size(), 20000u);
  // Every tenth 256-byte chunk is validation data, so both sets are drawn from the whole text.
  std::vector<uint16_t> train_bytes, val_bytes;
  for (size_t i = 0; i < text.size(); ++i)
    (i / 256 % 10 == 9 ? val_bytes : train_bytes).push_back(static_cast<unsigned char>(text[i]));
  Config base = synthetic_run(dir, train_bytes, train_bytes.size(), false);
  write_shard(dir.file("val_000000.bin"), val_bytes);
  base.data.val = dir.file("val_*.bin");
  std::map<std::string, double> val;
  for (const std::string recipe : {"fp32", "bf16", "fp16", "fp8", "fp8-e5m2"}) {
    SCOPED_TRACE(recipe);
    Config c = base;
    c.model = tiny_model(256, 2, 64, 4, 64);
    // One thread: these products are too small to share, and with ctest running two tests on two cores a
    // second thread only waits at OpenMP's barriers (a 2-thread run took 4x the wall time of a 1-thread one).
    c.train.threads = 1;
    c.train.batch_size = 8;
    c.train.seq_len = 64;
    c.train.steps = 500;
    c.train.eval_every = 500;
    c.train.eval_batches = 8;
    c.optim.lr = 3e-3;
    c.optim.warmup_steps = 20;
    c.log.run_dir = dir.file("text_" + recipe);
    c.precision.recipe = recipe.starts_with("fp8") ? "fp8" : recipe;
    if (recipe == "fp8-e5m2") c.precision.fp8_backward = "e5m2";
    Trainer trainer(c, config_to_yaml(c));
    const TrainSummary s = trainer.run();
    ASSERT_TRUE(s.last_val_loss.has_value());
    EXPECT_TRUE(std::isfinite(*s.last_val_loss));
    val[recipe] = *s.last_val_loss;
    std::cout << "[ recipe ] " << recipe << " validation loss on English prose bytes after 500 steps: " << *s.last_val_loss
              << "\n";
  }
  // Learned: below the entropy of the validation bytes' own unigram distribution (about 3.4 nats for this text).
  std::array<double, 256> counts{};
  for (uint16_t b : val_bytes) counts[b] += 1.0;
  double unigram = 0.0;
  const auto n = static_cast<double>(val_bytes.size());
  for (double k : counts)
    if (k > 0) unigram -= k / n * std::log(k / n);
  std::cout << "[ recipe ] unigram entropy of the validation bytes: " << unigram << "\n";
  EXPECT_LT(val["fp32"], unigram - 0.1);
  for (const char* recipe : {"bf16", "fp16", "fp8", "fp8-e5m2"}) EXPECT_NEAR(val[recipe], val["fp32"], 0.08) << recipe;
}

// The FP8 casts are real and delayed scaling follows its amax: the first step casts with scale 1, the
// second with 448 / amax of the first (every cast is E4M3 with BF16 gradients; history max of one
// step), the margin divides the scale by 2^margin, and the loss differs from bf16's in the low digits.
TEST(MixedPrecision, Fp8DelayedScalingFollowsTheAmax) {
  TempDir dir;
  std::vector<int32_t> inputs, targets;
  for (int margin : {0, 2}) {
    SCOPED_TRACE(margin);
    Config c = repeating_run(dir, "fp8");
    c.precision.fp8_margin = margin;
    one_batch(c, inputs, targets);
    Trainer trainer(c, config_to_yaml(c));
    const StepResult first = trainer.train_step(inputs, targets);
    EXPECT_EQ(first.fp8.scale_min, 1.0f);
    EXPECT_EQ(first.fp8.scale_max, 1.0f);
    // 2 blocks x 4 linear layers: each casts B*T inputs (x1, 4 or 3 wide) and its weight, once each.
    const int64_t C = c.model.n_embd, N = static_cast<int64_t>(c.train.batch_size) * c.train.seq_len;
    EXPECT_EQ(first.fp8.values, 2 * (N * C * (1 + 1 + 1 + 4) + 12 * C * C));
    EXPECT_GT(first.fp8.amax_max, 0.0f);
    const StepResult second = trainer.train_step(inputs, targets);
    EXPECT_FLOAT_EQ(second.fp8.scale_min, std::ldexp(448.0f / first.fp8.amax_max, -margin));
    EXPECT_GT(second.fp8.scale_max, second.fp8.scale_min);

    Config cb = repeating_run(dir, "bf16");
    Trainer bf16(cb, config_to_yaml(cb));
    const StepResult rb = bf16.train_step(inputs, targets);
    EXPECT_NE(first.loss, rb.loss);
    EXPECT_NEAR(first.loss, rb.loss, 2e-2 * rb.loss);
  }
}

// precision.grad_dtype bf16: the parameter gradients are stored in BF16 (2 bytes each), the step
// still trains, and it differs from FP32 gradients only by that rounding.
TEST(MixedPrecision, Bf16GradientsAreStoredInBf16) {
  TempDir dir;
  std::vector<int32_t> inputs, targets;
  Config c = repeating_run(dir, "bf16");
  c.train.grad_accum_steps = 2;
  one_batch(c, inputs, targets);
  Config c32 = c;
  c32.log.run_dir = dir.file("run_f32_grads");
  c.precision.grad_dtype = "bf16";
  Trainer trainer(c, config_to_yaml(c)), reference(c32, config_to_yaml(c32));
  const StepResult r = trainer.train_step(inputs, targets), r32 = reference.train_step(inputs, targets);
  EXPECT_TRUE(r.applied);
  Arena& grads = trainer.model().gradient_arena();
  for (size_t i = 0; i < grads.layout().buffers().size(); ++i) EXPECT_EQ(grads.tensor(i).dtype, DType::BF16);
  EXPECT_EQ(grads.layout().total_bytes(), ParameterLayout(c.model, DType::BF16).arena_layout().total_bytes());
  EXPECT_LT(grads.layout().total_bytes(), reference.model().gradient_arena().layout().total_bytes());
  const auto* codes = static_cast<const uint16_t*>(grads.base());
  size_t nonzero = 0;
  for (size_t i = 0; i < grads.layout().total_bytes() / 2; ++i) nonzero += (codes[i] & 0x7fffu) != 0;
  EXPECT_GT(nonzero, 1000u);
  EXPECT_EQ(r.loss, r32.loss);  // the forward is the same
  EXPECT_NE(r.grad_norm, r32.grad_norm);
  EXPECT_NEAR(r.grad_norm, r32.grad_norm, 1e-2 * r32.grad_norm);
}

// bf16 and fp16 with the masters on the device: AdamW writes the compute copy as it updates the masters
// (AdamWArgs::compute), so after each step the copy is already bitwise the cast of the new masters that
// the next forward would otherwise make (refresh_compute_weights casts them again here to compare), and
// the forwards cast no weight. fp8 casts its weights in the forward, with each step's scales.
TEST(MixedPrecision, TheUpdateWritesTheComputeCopyTheForwardWouldCast) {
  for (const std::string recipe : {"bf16", "fp16", "fp8"}) {
    TempDir dir;
    std::vector<int32_t> inputs, targets;
    Config c = repeating_run(dir, recipe);
    c.train.grad_accum_steps = 2;
    one_batch(c, inputs, targets);
    Trainer trainer(c, config_to_yaml(c));
    EXPECT_EQ(trainer.optimizer().writes_compute_copy(), recipe != "fp8") << recipe;
    Arena& copy = *trainer.model().compute_weight_arena();
    const auto* base = static_cast<const char*>(copy.base());
    for (int step = 0; step < 3; ++step) {
      ASSERT_TRUE(trainer.train_step(inputs, targets).applied) << recipe << " step " << step;
      const std::vector<char> written(base, base + copy.layout().total_bytes());
      trainer.model().refresh_compute_weights();
      const std::vector<char> cast(base, base + copy.layout().total_bytes());
      if (recipe != "fp8") EXPECT_TRUE(written == cast) << recipe << ": the copy after step " << step << " is not the masters' cast";
      else EXPECT_FALSE(written == cast) << "fp8: the copy is cast at the forward, so the update leaves it stale";
    }
  }
}

// Current scaling takes each scale from the tensor's own amax, so nothing saturates.
TEST(MixedPrecision, Fp8CurrentScalingNeverSaturates) {
  TempDir dir;
  std::vector<int32_t> inputs, targets;
  Config c = repeating_run(dir, "fp8");
  c.precision.fp8_scaling = "current";
  c.precision.fp8_backward = "e5m2";
  one_batch(c, inputs, targets);
  Trainer trainer(c, config_to_yaml(c));
  for (int i = 0; i < 5; ++i) {
    const StepResult r = trainer.train_step(inputs, targets);
    EXPECT_EQ(r.fp8.saturated, 0);
    EXPECT_GT(r.fp8.scale_min, 1.0f);  // the values are far below E4M3's 448
  }
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
