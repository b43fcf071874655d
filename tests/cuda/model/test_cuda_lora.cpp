// LoRA on the CUDA backend (on the emulator in CI): the adapters' products and the dropout on their input
// are ops the backend already has, so three LoRA steps must match the CPU's and leave the frozen base's bytes
// untouched. Losses: FP32 within 1e-4 relative, bf16 within the model tests' 2e-2; the adapters' gradients of
// the first step, from the same weights on both, within 1e-4 (FP32) and 2e-2 (bf16) of the largest; the adapters after the three AdamW steps,
// FP32 only, within 1e-3: AdamW divides each gradient by its own root mean square, so an element whose
// gradient is near zero moves by up to lr whatever its last bits were (under bf16's rounding of every stored
// activation that is most of B's elements, and the weights say little).
#include "backend/cuda_entry.h"
#include "backend/cuda_backend.h"
#include "model/gpt.h"
#include "optim/adamw.h"

#include "cpu/gradcheck.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

namespace gpt::test {
namespace {

Backend* cuda_backend() {
  static std::unique_ptr<Backend> cuda = cuda::device_count() > 0 ? cuda::make_backend() : nullptr;
  return cuda.get();
}

std::vector<char> download(Arena& arena, Backend& backend) {
  std::vector<char> host(arena.layout().total_bytes());
  backend.copy_to_host(host.data(), arena.base(), host.size());
  return host;
}

struct LoraRun {
  std::vector<double> losses;
  std::vector<float> adapters, first_gradients;
  bool base_unchanged = false;
};

// Three optimizer steps with the model's and the adapters' dropout on, rank 4 on all four targets, a 1-block
// model with the smallest shapes the backend's products take (C 32, B*T 32).
LoraRun train_three_steps(Backend& backend, const PrecisionRecipe& recipe) {
  ModelConfig m = tiny_model(23, 1, 32, 2, 16);
  m.dropout = 0.1;
  const int B = 2, T = 16;
  LoraSpec lora;
  lora.rank = 4;
  lora.alpha = 8.0;
  lora.dropout = 0.1;
  lora.targets = {true, true, true, true};
  GPT model(m, B, T, backend, DType::F32, {}, recipe, lora);
  model.init_weights(17);
  const std::vector<char> base = download(*model.base_arena(), backend);
  OptimConfig oc;
  oc.weight_decay = 0.0;
  AdamW optimizer(oc, model.parameter_layout(), backend);
  LoraRun r;
  for (uint32_t step = 0; step < 3; ++step) {
    model.zero_grads();
    const std::vector<int32_t> tokens = random_tokens(B * T, m.vocab_size, 100 + step);
    const std::vector<int32_t> targets = random_tokens(B * T, m.vocab_size, 200 + step);
    const StepContext ctx{9, step, 0, true};
    model.forward(tokens, targets, B, T, ctx, 1.0f / (B * T));
    r.losses.push_back(model.loss_sum());
    model.backward(ctx);
    if (step == 0) {
      const Tensor g = model.gradients_flat();
      r.first_gradients.resize(static_cast<size_t>(g.numel()));
      backend.copy_to_host(r.first_gradients.data(), g.data, g.bytes());
    }
    optimizer.step(model.parameter_arena(), model.gradient_arena(), 1e-2, 1.0);
  }
  r.adapters = model.parameters_to_host();
  r.base_unchanged = download(*model.base_arena(), backend) == base;
  return r;
}

TEST(CudaLora, ThreeStepsMatchTheCpu) {
  if (!cuda_backend()) GTEST_SKIP() << "no CUDA device (" << cuda::describe() << ")";
  PrecisionRecipe bf16;
  bf16.recipe = RecipeKind::Bf16;
  for (const auto& [name, recipe, tolerance] :
       {std::tuple{"fp32", PrecisionRecipe{}, 1e-4}, std::tuple{"bf16", bf16, 2e-2}}) {
    SCOPED_TRACE(name);
    const LoraRun cpu = train_three_steps(cpu_backend(), recipe);
    const LoraRun gpu = train_three_steps(*cuda_backend(), recipe);
    EXPECT_TRUE(gpu.base_unchanged);
    ASSERT_EQ(gpu.losses.size(), cpu.losses.size());
    for (size_t i = 0; i < cpu.losses.size(); ++i)
      EXPECT_LE(std::abs(gpu.losses[i] - cpu.losses[i]) / std::abs(cpu.losses[i]), tolerance) << "step " << i;
    const bool fp32 = std::string(name) == "fp32";
    const double gradients = max_normwise_error(
        gpu.first_gradients, std::vector<double>(cpu.first_gradients.begin(), cpu.first_gradients.end()));
    const double adapters =
        max_normwise_error(gpu.adapters, std::vector<double>(cpu.adapters.begin(), cpu.adapters.end()));
    std::printf("  LoRA %s: first gradients %.3g, adapters %.3g normwise from the CPU's\n", name, gradients, adapters);
    EXPECT_LE(gradients, fp32 ? 1e-4 : 2e-2);
    if (fp32) EXPECT_LE(adapters, 1e-3);
  }
}

}  // namespace
}  // namespace gpt::test
