// The CUDA backend on an emulated Tesla T4 (Turing, 7.5: no cp.async, no BF16 tensor-core mma, 64 KiB of
// shared memory a block), the oldest GPU CUDA 13 compiles for: 4 steps of 2 micro-batches with dropout
// against the CPU from the same weights and data, under fp32, fp16 and bf16, at C = 128 in two heads of 64
// (the fused attention on its tiled kernels) and one of 128 (the scalar ones: the tiled ones' tiles do not
// fit), within the tolerances of tests/cuda/model/test_cuda_training.cpp (measured 2026-12-07, largest
// relative loss differences: fp32 1.2e-6, fp16 2.9e-3, bf16 1.8e-3, the same as on the emulated H100's
// tensor-core kernels; at C = 256 the bf16 run drifts 12% by step 4 on either device, the model itself
// being unstable there at this learning rate); the activation bytes the first step writes equal
// the plan. A kernel the device could not run (an sm_80 instruction, shared memory past 64 KiB) fails the
// run at its launch. The backend is made directly (CudaBackend), not by make_backend, whose check of the
// build's architectures refuses 7.5 in a build without sm_75 (CI's 80;90; test_device_support.cpp).
#include "backend/cuda_backend.h"
#include "cuda/emu/emu_test_util.h"
#include "cuda/model/cross_backend_tolerance.h"
#include "train_util.h"

#include <gtest/gtest.h>

#include <cstdio>

namespace gpt::test {
namespace {

RecomputePolicy no_recompute() { return resolve_recompute(RecomputeConfig{}, 3); }

TEST(TuringTraining, Fp32Fp16AndBf16MatchTheCpu) {
  const cuda::test::EmulatedDevice t4(cuda::test::tesla_t4());
  cuda::CudaBackend backend(0);
  EXPECT_NE(backend.capabilities().fp8_products_unavailable.find("compute capability 7.5) has no FP8 tensor cores"),
            std::string::npos);
  std::printf("Tesla T4 (emulated) vs CPU, 4 steps x 2 micro-batches (largest |loss difference| / loss):\n");
  for (const int head_size : {64, 128}) {
    ModelConfig m = tiny_model(23, 3, 128, 128 / head_size, 16);
    m.dropout = 0.1;
    for (const RecipeKind kind : {RecipeKind::Fp32, RecipeKind::Fp16, RecipeKind::Bf16}) {
      PrecisionRecipe recipe;
      recipe.recipe = kind;
      SCOPED_TRACE(::testing::Message() << "head size " << head_size << ", " << recipe_name(kind));
      const TrainResult cpu = train_steps(cpu_backend(), {m, 2, 16, 2, 4}, no_recompute(), recipe);
      const TrainResult gpu = train_steps(backend, {m, 2, 16, 2, 4}, no_recompute(), recipe);
      const double worst = expect_losses_near_the_cpus(cpu.losses, gpu.losses, recipe);
      EXPECT_EQ(gpu.measured, gpu.planned);
      std::printf("  head size %3d %-5s %.3g (tolerance %.0e)\n", head_size, std::string(recipe_name(kind)).c_str(), worst,
                  cross_backend_loss_tolerance(recipe));
    }
  }
}

}  // namespace
}  // namespace gpt::test
