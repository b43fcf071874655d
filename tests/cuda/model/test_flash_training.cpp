// The fused attention under the model and the trainer, at a head size the tensor-core kernels take (64):
//   - the trainer with train.attention fused against materialised on CUDA, 4 steps with dropout: the
//     losses within the recipe's tolerance (bf16: 2e-2 relative, as CUDA against the CPU; fp32 1e-4);
//   - every recompute mode bitwise equal to none with the fused attention (bf16), and the activation
//     bytes the first step writes equal to the plan, which holds each block's log-sum-exp and no T x T
//     buffer.
// (tests/cuda/model/test_cuda_training.cpp runs its model at head size 16 on the default, fused backend:
// the scalar kernels under every recipe.)
#include "backend/cuda_entry.h"
#include "cuda/model/skip_without_cuda.h"
#include "memory/arena_usage.h"
#include "memory/recompute.h"
#include "model/gpt.h"
#include "train/trainer.h"

#include "config/config_loader.h"
#include "cpu/gradcheck.h"
#include "test_util.h"
#include "train/synthetic_run.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>

namespace gpt::test {
namespace {

TEST(CudaFlashTrainer, FusedAttentionTrainsAsTheMaterialisedOne) {
  SKIP_WITHOUT_CUDA();
  TempDir dir;
  Config base = synthetic_run(dir, {1, 4, 2, 8, 5, 7, 3, 3, 9, 0, 11, 6, 2, 13, 15, 1, 10}, 20000, false);
  base.model = tiny_model(16, 2, 128, 2, 16);
  base.model.dropout = 0.1;
  base.train.backend = "cuda";
  base.train.batch_size = 2;
  base.train.steps = 4;
  for (const auto& [recipe, tolerance] : {std::pair{std::string("bf16"), 2e-2}, std::pair{std::string("fp32"), 1e-4}}) {
    SCOPED_TRACE(recipe);
    Config c = base;
    c.precision.recipe = recipe;
    for (const std::string attention : {"fused", "materialised"}) {
      c.train.attention = attention;
      c.log.run_dir = dir.file(recipe + "_" + attention);
      Trainer(c, config_to_yaml(c)).run();
    }
    const auto fused = logged_losses(dir.file(recipe + "_fused"));
    const auto materialised = logged_losses(dir.file(recipe + "_materialised"));
    ASSERT_EQ(fused.size(), 4u);
    ASSERT_EQ(materialised.size(), 4u);
    double worst = 0.0;
    for (const auto& [step, loss] : materialised) {
      const double rel = std::fabs(fused.at(step) - loss) / std::fabs(loss);
      worst = std::max(worst, rel);
      EXPECT_LE(rel, tolerance) << "step " << step << ": materialised " << loss << ", fused " << fused.at(step);
    }
    std::printf("  fused vs materialised attention, %s, 4 steps: largest |loss difference| / loss %.3g\n",
                recipe.c_str(), worst);
  }
}

struct FlashRun {
  std::vector<char> first_gradients;
  std::vector<double> losses;
  uint64_t planned = 0, measured = 0;
};

FlashRun train_three_steps(Backend& backend, const RecomputePolicy& recompute, const PrecisionRecipe& recipe) {
  ModelConfig m = tiny_model(23, 3, 128, 2, 16);
  m.dropout = 0.1;
  const int B = 2, T = 16;
  GPT model(m, B, T, backend, DType::F32, recompute, recipe);
  model.init_weights(5);
  FlashRun r;
  r.planned = model.activation_plan().total_bytes();
  for (uint32_t step = 0; step < 3; ++step) {
    if (step == 0) poison_arena(model.activation_arena(), backend);
    model.zero_grads();
    const StepContext ctx{3, step, 0, true};
    model.forward(random_tokens(B * T, m.vocab_size, 10 + step), random_tokens(B * T, m.vocab_size, 20 + step), B, T, ctx,
                  1.0f / (B * T));
    r.losses.push_back(model.loss_sum());
    model.backward(ctx);
    model.gradient_norm_squared();  // what a trainer's step runs next; it writes the plan's sum-of-squares buffer
    if (step == 0) {
      r.first_gradients.resize(model.gradient_arena().layout().total_bytes());
      backend.copy_to_host(r.first_gradients.data(), model.gradient_arena().base(), r.first_gradients.size());
      r.measured = written_bytes(model.activation_arena(), backend);
    }
  }
  return r;
}

RecomputePolicy policy(const std::string& mode, std::vector<std::string> ops = {}) {
  RecomputeConfig c;
  c.mode = mode;
  c.ops = std::move(ops);
  return resolve_recompute(c, 3);
}

TEST(CudaFlashModel, EveryRecomputeModeIsBitwiseEqualToNone) {
  SKIP_WITHOUT_CUDA();
  BackendOptions options;
  options.attention = AttentionKind::Fused;
  auto backend = cuda::make_backend(options);
  ASSERT_FALSE(backend->attention_keeps_probs());
  PrecisionRecipe bf16;
  bf16.recipe = RecipeKind::Bf16;
  const FlashRun none = train_three_steps(*backend, policy("none"), bf16);
  EXPECT_EQ(none.measured, none.planned);
  for (const RecomputePolicy& p : {policy("selective", {"attention", "gelu", "layernorm"}), policy("full")}) {
    SCOPED_TRACE(p.describe());
    const FlashRun r = train_three_steps(*backend, p, bf16);
    ASSERT_EQ(r.first_gradients.size(), none.first_gradients.size());
    EXPECT_EQ(std::memcmp(r.first_gradients.data(), none.first_gradients.data(), r.first_gradients.size()), 0);
    EXPECT_EQ(r.losses, none.losses);
    EXPECT_EQ(r.measured, r.planned);
  }
}

TEST(CudaFlashModel, ThePlanKeepsTheLogSumExpAndNoSquare) {
  SKIP_WITHOUT_CUDA();
  BackendOptions options;
  auto fused = cuda::make_backend(options);
  options.attention = AttentionKind::Materialised;
  auto materialised = cuda::make_backend(options);
  ModelConfig m = tiny_model(23, 3, 128, 2, 16);
  const int B = 2, T = 16;
  for (Backend* backend : {fused.get(), materialised.get()}) {
    GPT model(m, B, T, *backend, DType::F32, policy("none"), PrecisionRecipe{});
    const ArenaLayout& layout = model.activation_plan().layout;
    bool square = false, lse = false;
    for (const ArenaBuffer& buffer : layout.buffers()) {
      square |= buffer.bytes >= static_cast<uint64_t>(B) * m.n_head * T * T * 4 && buffer.name.find("probs") != std::string::npos;
      lse |= buffer.name == "block0.lse";
    }
    EXPECT_EQ(square, backend->attention_keeps_probs());
    EXPECT_EQ(lse, !backend->attention_keeps_probs());
  }
}

}  // namespace
}  // namespace gpt::test
