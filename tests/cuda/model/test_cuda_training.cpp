// The CUDA backend under the model, the trainer, recomputation and every precision recipe: the same code
// as on the CPU, so the CPU's equivalences must hold on CUDA too, and the two backends must agree within
// what their different orders of FP32 arithmetic allow. On the emulator in CI (gpt_cuda_emu_tests), on
// a GPU with scripts/gpu_check.sh (gpt_cuda_tests); skipped with a message where there is neither.
//   - 10 training steps on CUDA against the CPU from the same weights and data, for each recipe: FP32
//     losses within 1e-4 relative, the narrow recipes within the tolerance below; the differences are
//     printed for the closing notes.
//   - every recompute mode bitwise equal to none on CUDA, under FP32 and a narrow recipe;
//   - planned == measured: the activation bytes the first step writes, and the device bytes the backend
//     holds (arenas + its reserved workspace) against the model's arenas and the backend's report, and in
//     the trainer's records of every step against the ledger's total;
//   - the same run twice, bitwise, under fp32, bf16 and fp8 (on the emulator, the second under other block
//     and thread orders); kill-and-resume (3 + 3 steps against 6) bitwise.
#include "backend/cuda_entry.h"
#include "backend/cuda_backend.h"
#include "memory/arena_usage.h"
#include "memory/recompute.h"
#include "model/gpt.h"
#include "optim/adamw.h"
#include "train/trainer.h"

#include "config/config_loader.h"
#include "cpu/gradcheck.h"
#include "cuda/model/cross_backend_tolerance.h"
#include "test_util.h"
#include "train_util.h"
#include "train/device_records.h"
#include "train/synthetic_run.h"

#include <gtest/gtest.h>

#if defined(GPT_CUDA_EMU)
#include "emu/control.h"
#endif

#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <optional>

namespace gpt::test {
namespace {

Backend* cuda_backend() {
  static std::unique_ptr<Backend> cuda = cuda::device_count() > 0 ? cuda::make_backend() : nullptr;
  return cuda.get();
}

#define SKIP_WITHOUT_CUDA()                                                                               \
  if (!cuda_backend())                                                                                    \
  GTEST_SKIP() << "no CUDA device (" << cuda::describe() << "); gpt_cuda_emu_tests runs these on the emulator"

RecomputePolicy policy(const std::string& mode, std::vector<std::string> ops = {}, const std::string& every = "1") {
  RecomputeConfig c;
  c.mode = mode;
  c.ops = std::move(ops);
  c.every = every;
  return resolve_recompute(c, 3);
}

// Four optimizer steps of two micro-batches with dropout 0.1 on a 3-block model with an odd vocabulary
// (23 padded to 24) and the smallest shapes cuBLASLt's FP8 products take (C 32, B*T 32: multiples of 16),
// FP8 scales updated after every step as the trainer does.
TrainResult train_four_steps(Backend& backend, const RecomputePolicy& recompute, const PrecisionRecipe& recipe) {
  ModelConfig m = tiny_model(23, 3, 32, 2, 16);
  m.dropout = 0.1;
  return train_steps(backend, {m, 2, 16, 2, 4}, recompute, recipe);
}

std::vector<std::pair<std::string, PrecisionRecipe>> recipes() {
  std::vector<std::pair<std::string, PrecisionRecipe>> out;
  out.emplace_back("fp32", PrecisionRecipe{});
  PrecisionRecipe r;
  r.recipe = RecipeKind::Bf16;
  out.emplace_back("bf16", r);
  r = {};
  r.recipe = RecipeKind::Fp16;
  out.emplace_back("fp16", r);
  r = {};
  r.recipe = RecipeKind::Fp8;
  r.fp8.backward = Fp8Backward::E5M2;
  r.fp8.scaling.amax_history = 3;
  out.emplace_back("fp8 delayed e5m2", r);
  r = {};
  r.recipe = RecipeKind::Fp8;
  r.fp8.backward = Fp8Backward::Bf16;
  r.fp8.scaling.mode = Fp8ScalingMode::Current;
  out.emplace_back("fp8 current", r);
  return out;
}

TEST(CudaModel, EveryRecipeMatchesTheCpu) {
  SKIP_WITHOUT_CUDA();
  std::printf("CUDA vs CPU, 4 steps x 2 micro-batches (largest |loss difference| / loss, largest weight difference):\n");
  for (const auto& [name, recipe] : recipes()) {
    SCOPED_TRACE(name);
    const TrainResult cpu = train_four_steps(cpu_backend(), policy("none"), recipe);
    const TrainResult gpu = train_four_steps(*cuda_backend(), policy("none"), recipe);
    const double worst = expect_losses_near_the_cpus(cpu.losses, gpu.losses, recipe);
    double worst_weight = 0.0;
    for (size_t i = 0; i < cpu.final_parameters.size(); ++i)
      worst_weight = std::max(worst_weight, static_cast<double>(std::fabs(gpu.final_parameters[i] - cpu.final_parameters[i])));
    std::printf("  %-18s loss %.3g (tolerance %.0e), weights %.3g\n", name.c_str(), worst,
                cross_backend_loss_tolerance(recipe), worst_weight);
    EXPECT_EQ(gpu.measured, gpu.planned);
  }
}

// cuBLASLt's FP8 products take rows in multiples of 16 only; a micro-batch of B*T = 3*13 = 39 rows trains
// anyway: the forward's and the input gradient's rows past 32 go to the row product, and the weight
// gradient (whose K is the 39 rows) multiplies transposed copies padded with zeros to 48.
TEST(CudaModel, Fp8TrainsAMicroBatchWhoseRowsAreNotAMultipleOf16) {
  SKIP_WITHOUT_CUDA();
  ModelConfig m = tiny_model(23, 2, 32, 2, 16);
  m.dropout = 0.1;
  for (const auto& [name, recipe] : recipes()) {
    if (recipe.recipe != RecipeKind::Fp8) continue;
    SCOPED_TRACE(name);
    const TrainResult cpu = train_steps(cpu_backend(), {m, 3, 13, 2, 3}, policy("none"), recipe);
    const TrainResult gpu = train_steps(*cuda_backend(), {m, 3, 13, 2, 3}, policy("none"), recipe);
    std::printf("  %-18s 39 rows: largest |loss difference| / loss %.3g\n", name.c_str(),
                expect_losses_near_the_cpus(cpu.losses, gpu.losses, recipe));
    EXPECT_EQ(gpu.measured, gpu.planned);
  }
}

// A token id past wte's rows or a target outside [0, V) (other than -1) is found by the kernels on the
// device and reported by the next copy to the host, naming the first position and the value; the
// record is cleared, so the next good micro-batch trains.
TEST(CudaModel, BadTokensAndTargetsAreReportedAfterTheForward) {
  SKIP_WITHOUT_CUDA();
  const ModelConfig m = tiny_model(23, 3, 32, 2, 16);
  const int B = 2, T = 16;
  GPT model(m, B, T, *cuda_backend(), DType::F32, policy("none"), PrecisionRecipe{});
  model.init_weights(3);
  const std::vector<int32_t> tokens = random_tokens(B * T, m.vocab_size, 1), targets = random_tokens(B * T, m.vocab_size, 2);
  const StepContext ctx{};
  auto loss_error = [&](const std::vector<int32_t>& tok, const std::vector<int32_t>& tgt) -> std::string {
    model.forward(tok, tgt, B, T, ctx);
    try {
      model.loss_sum();
    } catch (const std::exception& e) {
      return e.what();
    }
    return "";
  };
  std::vector<int32_t> bad_tokens = tokens;
  bad_tokens[25] = -3;
  bad_tokens[21] = 1000;
  EXPECT_NE(loss_error(bad_tokens, targets).find("token id 1000 at position 21 of the micro-batch"), std::string::npos);
  std::vector<int32_t> bad_targets = targets;
  bad_targets[9] = -2;
  bad_targets[7] = m.vocab_size;
  EXPECT_NE(loss_error(tokens, bad_targets).find("target 23 at position 7 of the micro-batch"), std::string::npos);
  EXPECT_EQ(loss_error(tokens, targets), "");
  EXPECT_TRUE(std::isfinite(model.loss_sum()));
}

// GPT_CUDA_SYNC=1 synchronises after every op, so what the device finds is reported by the op that found
// it: a bad token stops the forward itself (its embedding), not the copy of the loss after it. A good
// micro-batch then gives bitwise the loss of a backend that does not synchronise.
TEST(CudaModel, UnderGptCudaSyncABadTokenStopsTheForwardThatMetIt) {
  SKIP_WITHOUT_CUDA();
  const char* before = std::getenv("GPT_CUDA_SYNC");
  const std::string saved = before ? before : "";
  setenv("GPT_CUDA_SYNC", "1", 1);
  const std::unique_ptr<Backend> synced = cuda::make_backend();
  if (before) setenv("GPT_CUDA_SYNC", saved.c_str(), 1);
  else unsetenv("GPT_CUDA_SYNC");

  const ModelConfig m = tiny_model(23, 2, 32, 2, 16);
  const int B = 2, T = 16;
  const std::vector<int32_t> tokens = random_tokens(B * T, m.vocab_size, 1), targets = random_tokens(B * T, m.vocab_size, 2);
  const StepContext ctx{};
  GPT model(m, B, T, *synced, DType::F32, policy("none"), PrecisionRecipe{});
  model.init_weights(3);
  std::vector<int32_t> bad_tokens = tokens;
  bad_tokens[21] = 1000;
  const std::string message = error_message([&] { model.forward(bad_tokens, targets, B, T, ctx); });
  EXPECT_NE(message.find("token id 1000 at position 21 of the micro-batch"), std::string::npos) << message;

  model.forward(tokens, targets, B, T, ctx);
  GPT reference(m, B, T, *cuda_backend(), DType::F32, policy("none"), PrecisionRecipe{});
  reference.init_weights(3);
  reference.forward(tokens, targets, B, T, ctx);
  EXPECT_EQ(model.loss_sum(), reference.loss_sum());
}

TEST(CudaModel, EveryRecomputeModeIsBitwiseEqualToNone) {
  SKIP_WITHOUT_CUDA();
  const std::vector<RecomputePolicy> policies = {policy("selective", {"attention", "gelu", "layernorm"}),
                                                 policy("selective", {"gelu"}), policy("full", {}, "1"),
                                                 policy("full", {}, "2")};
  for (const auto& [name, recipe] : recipes()) {
    if (name == "fp16" || name == "fp8 current") continue;  // fp32, bf16 and fp8 cover the three storage paths
    SCOPED_TRACE(name);
    const TrainResult reference = train_four_steps(*cuda_backend(), policy("none"), recipe);
    for (const RecomputePolicy& p : policies) {
      SCOPED_TRACE(p.describe());
      const TrainResult r = train_four_steps(*cuda_backend(), p, recipe);
      expect_bitwise_equal_runs(r, reference);
      EXPECT_EQ(r.measured, r.planned);
    }
  }
}

// A GPU runs a kernel's blocks and warps in a different order each time; no reduction may depend on it.
// On the emulator the second run therefore goes under another schedule seed: every block starts in
// another order and every block's threads interleave otherwise, which a float atomic or an
// order-dependent sum anywhere in a training step would turn into different bits.
TEST(CudaModel, TheSameRunTwiceIsBitwiseEqual) {
  SKIP_WITHOUT_CUDA();
  for (const auto& [name, recipe] : recipes()) {
    if (name == "fp16" || name == "fp8 current") continue;  // fp32, bf16 and fp8 cover the three storage paths
    SCOPED_TRACE(name);
    const TrainResult a = train_four_steps(*cuda_backend(), policy("none"), recipe);
#if defined(GPT_CUDA_EMU)
    const uint64_t seed = cuda::emu::schedule_seed();
    cuda::emu::set_schedule_seed(seed + 0x9E3779B97F4A7C15ull);
#endif
    const TrainResult b = train_four_steps(*cuda_backend(), policy("none"), recipe);
#if defined(GPT_CUDA_EMU)
    cuda::emu::set_schedule_seed(seed);
#endif
    EXPECT_EQ(a.first_gradients, b.first_gradients);
    EXPECT_EQ(a.losses, b.losses);
    EXPECT_EQ(a.final_parameters, b.final_parameters);
  }
}

// The device bytes the backend holds while a model lives are its arenas, as planned, plus the workspace it
// reserved at construction, which it reports to the planner.
TEST(CudaModel, DeviceBytesAreThePlannedArenas) {
  SKIP_WITHOUT_CUDA();
  auto* cuda = dynamic_cast<cuda::CudaBackend*>(cuda_backend());
  ASSERT_NE(cuda, nullptr);
  const size_t before = cuda->allocated_bytes();
  PrecisionRecipe bf16;
  bf16.recipe = RecipeKind::Bf16;
  ModelConfig m = tiny_model(23, 3, 32, 2, 16);
  GPT model(m, 2, 16, *cuda, DType::F32, policy("none"), bf16);
  size_t arenas = model.parameter_arena().layout().total_bytes() + model.gradient_arena().layout().total_bytes() +
                  model.activation_arena().layout().total_bytes();
  if (Arena* compute = model.compute_weight_arena()) arenas += compute->layout().total_bytes();
  EXPECT_EQ(cuda->allocated_bytes() - before, arenas);
  EXPECT_EQ(cuda->capabilities().reserved_device_bytes, cuda->reserved_bytes());
  EXPECT_GT(cuda->reserved_bytes(), 0u);
}

// The trainer with train.backend: cuda, end to end: 10 steps log the CPU's losses within the recipe's
// tolerance, and 3 + 3 resumed steps equal 6 uninterrupted ones bit for bit.
TEST(CudaTrainer, TenStepsLogTheCpuLosses) {
  SKIP_WITHOUT_CUDA();
  TempDir dir;
  const Config base = synthetic_run(dir, {1, 4, 2, 8, 5, 7, 3, 3, 9, 0, 11, 6, 2, 13, 15, 1, 10}, 20000, false);
  for (const std::string recipe : {"fp32", "bf16", "fp8"}) {
    SCOPED_TRACE(recipe);
    Config c = base;
    c.precision.recipe = recipe;
    c.model.dropout = 0.1;
    c.log.run_dir = dir.file("cpu_" + recipe);
    { Trainer(c, config_to_yaml(c)).run(); }
    c.train.backend = "cuda";
    c.log.run_dir = dir.file("cuda_" + recipe);
    { Trainer(c, config_to_yaml(c)).run(); }
    const auto cpu = logged_losses(dir.file("cpu_" + recipe));
    const auto gpu = logged_losses(dir.file("cuda_" + recipe));
    ASSERT_EQ(cpu.size(), 10u);
    ASSERT_EQ(gpu.size(), 10u);
    PrecisionRecipe r;
    r.recipe = recipe == "fp32" ? RecipeKind::Fp32 : recipe == "bf16" ? RecipeKind::Bf16 : RecipeKind::Fp8;
    double worst = 0.0;
    for (const auto& [step, loss] : cpu) {
      const double rel = std::fabs(gpu.at(step) - loss) / std::fabs(loss);
      worst = std::max(worst, rel);
      EXPECT_LE(rel, cross_backend_loss_tolerance(r)) << "step " << step << ": cpu " << loss << ", cuda " << gpu.at(step);
    }
    std::printf("  trainer %-5s 10 steps: largest |loss difference| / loss %.3g\n", recipe.c_str(), worst);
  }
}

// precision.tf32 reaches the matrix products: the FP32 run's losses move (TF32 rounds the operands to 10
// mantissa bits) but stay close; without the key they are the FP32 ones.
TEST(CudaTrainer, Tf32IsUsedOnlyWhenTheConfigAsks) {
  SKIP_WITHOUT_CUDA();
  TempDir dir;
  Config c = synthetic_run(dir, {1, 4, 2, 8, 5, 7, 3, 3, 9, 0, 11, 6, 2, 13, 15, 1, 10}, 20000, false);
  c.train.backend = "cuda";
  c.train.steps = 3;
  c.log.run_dir = dir.file("fp32");
  { Trainer(c, config_to_yaml(c)).run(); }
  c.precision.tf32 = true;
  c.log.run_dir = dir.file("tf32");
  { Trainer(c, config_to_yaml(c)).run(); }
  const auto fp32 = logged_losses(dir.file("fp32")), tf32 = logged_losses(dir.file("tf32"));
  ASSERT_EQ(fp32.size(), 3u);
  ASSERT_EQ(tf32.size(), 3u);
  EXPECT_NE(fp32, tf32);
  for (const auto& [step, loss] : fp32) EXPECT_NEAR(tf32.at(step), loss, 1e-2 * loss) << "step " << step;
}

// Nothing is allocated inside a step, so every step's record holds the ledger's total on the device, under
// each recipe, with recomputation and with the optimizer offloaded (whose device column is smaller); the
// device's own count is at least that. The CPU backend's records have no device memory.
TEST(CudaTrainer, EveryStepHoldsTheLedgersDeviceBytes) {
  SKIP_WITHOUT_CUDA();
  TempDir dir;
  const Config base = synthetic_run(dir, cycle_pattern(), 20000, false);
  struct Case {
    const char* recipe;
    const char* recompute;
    const char* offload;
  };
  std::optional<double> device_only_planned;
  for (const Case& k : {Case{"fp32", "full", "none"}, Case{"bf16", "none", "none"}, Case{"fp8", "selective", "none"},
                        Case{"bf16", "none", "optimizer"}}) {
    SCOPED_TRACE(fmt::format("{} recompute {} offload {}", k.recipe, k.recompute, k.offload));
    Config c = base;
    c.train.backend = "cuda";
    c.train.steps = 3;
    c.precision.recipe = k.recipe;
    c.recompute.mode = k.recompute;
    c.memory.offload = k.offload;
    c.log.run_dir = dir.file(fmt::format("{}_{}_{}", k.recipe, k.recompute, k.offload));
    { Trainer(c, config_to_yaml(c)).run(); }
    expect_device_held_as_planned(c.log.run_dir, 3);
    const double planned = device_records(c.log.run_dir).planned.begin()->second;
    if (std::string(k.recipe) == "bf16" && std::string(k.recompute) == "none") {
      if (device_only_planned) EXPECT_LT(planned, *device_only_planned) << "offload must shrink the device's part";
      device_only_planned = planned;
    }
  }
  Config cpu = base;
  cpu.train.steps = 2;
  cpu.log.run_dir = dir.file("cpu");
  { Trainer(cpu, config_to_yaml(cpu)).run(); }
  const DeviceRecords host = device_records(cpu.log.run_dir);
  EXPECT_EQ(host.steps, 2u);
  EXPECT_TRUE(host.held.empty());
  EXPECT_TRUE(host.used.empty());
  EXPECT_TRUE(host.total.empty());
}

TEST(CudaTrainer, ResumeEqualsTheUninterruptedRun) {
  SKIP_WITHOUT_CUDA();
  TempDir dir;
  Config c = synthetic_run(dir, {1, 4, 2, 8, 5, 7, 3, 3, 9, 0, 11, 6, 2, 13, 15, 1, 10}, 20000, false);
  c.train.backend = "cuda";
  c.model.dropout = 0.1;
  c.precision.recipe = "bf16";
  c.train.steps = 6;
  c.log.run_dir = dir.file("straight");
  Trainer straight(c, config_to_yaml(c));
  straight.run();
  Config first = c;
  first.train.steps = 3;
  first.log.run_dir = dir.file("resumed");
  Config second = first;
  second.train.steps = 6;
  second.train.resume = true;
  { Trainer(first, config_to_yaml(first)).run(); }
  Trainer resumed(second, config_to_yaml(second));
  EXPECT_EQ(resumed.step(), 3);
  resumed.run();
  EXPECT_EQ(resumed.model().parameters_to_host(), straight.model().parameters_to_host());
  EXPECT_EQ(logged_losses(dir.file("resumed")), logged_losses(dir.file("straight")));
}

}  // namespace
}  // namespace gpt::test
