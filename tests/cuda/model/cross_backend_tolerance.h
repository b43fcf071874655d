// How far a training step's loss on the CUDA backend may be from the CPU's, relative, per recipe: for the
// model-level tests on a GPU and on the emulator's devices (tests/cuda/model, tests/cuda/emu).
#pragma once

#include "precision/recipe.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace gpt::test {

// FP32 only reorders FP32 arithmetic; a narrow recipe rounds every stored activation, and a last-bit
// difference before a rounding moves the stored value by one unit of the narrow format, which the next
// ops carry.
inline double cross_backend_loss_tolerance(const PrecisionRecipe& r) {
  switch (r.recipe) {
    case RecipeKind::Fp32: return 1e-4;
    case RecipeKind::Bf16: return 2e-2;
    case RecipeKind::Fp16: return 5e-3;
    case RecipeKind::Fp8: return 5e-2;
  }
  return 0.0;
}

// Expects every step's loss on the device within the recipe's tolerance of the CPU's (and finite); returns
// the largest relative difference, for the test to print.
inline double expect_losses_near_the_cpus(const std::vector<double>& cpu, const std::vector<double>& device,
                                          const PrecisionRecipe& recipe) {
  EXPECT_EQ(device.size(), cpu.size());
  double worst = 0.0;
  for (size_t i = 0; i < std::min(cpu.size(), device.size()); ++i) {
    EXPECT_TRUE(std::isfinite(device[i])) << "step " << i;
    const double rel = std::fabs(device[i] - cpu[i]) / std::fabs(cpu[i]);
    worst = std::max(worst, rel);
    EXPECT_LE(rel, cross_backend_loss_tolerance(recipe)) << "step " << i << ": cpu " << cpu[i] << ", device " << device[i];
  }
  return worst;
}

}  // namespace gpt::test
