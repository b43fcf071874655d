// The FP8 products' operand copies on a backend that stages them (cuBLASLt's TN-only FP8): one activation
// buffer, fp8.staging, sized for the largest product of the FP8 blocks, against sizes worked out by hand;
// none on a backend that does not stage, or without FP8 blocks; counted in the ledger's temporaries.
#include "backend/matmul_staging.h"
#include "memory/activation_plan.h"
#include "memory/planner.h"

#include "test_util.h"

#include <gtest/gtest.h>

namespace gpt::test {
namespace {

constexpr int64_t kB = 2, kT = 32, kC = 64;

Config staging_config(const std::string& recipe, const std::string& backward) {
  Config c;
  c.model = tiny_model(64, 4, kC, 4, 32);
  c.train.batch_size = kB;
  c.train.seq_len = kT;
  c.precision.recipe = recipe;
  c.precision.fp8_backward = backward;
  return c;
}

ActivationPlan plan(const Config& c, bool stages) {
  const PrecisionLayout precision(precision_recipe(c.precision), c.model.n_layer);
  return plan_activations(c.model, precision, {kB, kT}, false, resolve_recompute(c.recompute, c.model.n_layer), stages);
}

uint64_t staging_bytes(const ActivationPlan& p) {
  return p.matmul_staging < 0 ? 0 : p.layout.buffer(static_cast<size_t>(p.matmul_staging)).bytes;
}

// Both FP8 operands with K contiguous (TN) are used in place; each other layout stages its copies one
// byte an element, the second at the arena's alignment, K padded to a multiple of 16 where both are
// copied; a 16-bit x FP8 product widens the FP8 operand.
TEST(Fp8Staging, TheRuleStagesWhatCublasLtCannotTakeInPlace) {
  EXPECT_EQ(matmul_staging({DType::E4M3, DType::E4M3, 48, 80, 64, false, true}).bytes, 0u);
  const MatmulStaging both = matmul_staging({DType::E5M2, DType::E4M3, 48, 80, 17 * 16, true, false});
  EXPECT_EQ(both.a, 0u);
  EXPECT_EQ(both.b, ArenaLayout::aligned(48 * 272));
  EXPECT_EQ(both.bytes, ArenaLayout::aligned(48 * 272) + 80 * 272);
  // Both copied (a weight gradient, K its batch's rows): K = 39 is padded to 48 in both copies.
  const MatmulStaging padded = matmul_staging({DType::E5M2, DType::E4M3, 48, 80, 39, true, false});
  EXPECT_EQ(padded.b, ArenaLayout::aligned(48 * 48));
  EXPECT_EQ(padded.bytes, ArenaLayout::aligned(48 * 48) + 80 * 48);
  // One copied: K stays as it is (cuBLASLt refuses it; the model's widths are multiples of 16).
  EXPECT_EQ(matmul_staging({DType::E4M3, DType::E4M3, 48, 80, 39, true, true}).bytes, 48u * 39);
  const MatmulStaging weight = matmul_staging({DType::E5M2, DType::E4M3, 48, 80, 64, false, false});
  EXPECT_EQ(weight.a, MatmulStaging::kNotStaged);
  EXPECT_EQ(weight.bytes, 80u * 64);
  EXPECT_EQ(matmul_staging({DType::BF16, DType::E4M3, 48, 80, 64, false, false}).bytes, 2u * 64 * 80);
  EXPECT_EQ(matmul_staging({DType::E4M3, DType::F16, 48, 80, 64, true, false}).bytes, 2u * 48 * 64);
  EXPECT_EQ(matmul_staging({DType::BF16, DType::BF16, 48, 80, 64, true, false}).bytes, 0u);
}

// Backward e5m2: the largest copies are a weight gradient's two transposed operands, s*b*(h + 4h) bytes
// (fc and fc_proj). Backward bf16: fc_proj's weight gradient widens its [b,s,4h] E4M3 input to BF16, 8sbh.
TEST(Fp8Staging, ThePlanHoldsTheLargestProductsCopies) {
  const uint64_t rows = kB * kT;
  EXPECT_EQ(staging_bytes(plan(staging_config("fp8", "e5m2"), true)), ArenaLayout::aligned(rows * kC) + rows * 4 * kC);
  const ActivationPlan widened = plan(staging_config("fp8", "bf16"), true);
  EXPECT_EQ(staging_bytes(widened), rows * 4 * kC * 2);
  EXPECT_EQ(widened.layout.buffer(static_cast<size_t>(widened.matmul_staging)).dtype, DType::U8);
  // Not on a backend that multiplies FP8 in any layout (the CPU), nor without FP8 blocks.
  EXPECT_EQ(plan(staging_config("fp8", "e5m2"), false).matmul_staging, -1);
  EXPECT_EQ(plan(staging_config("bf16", "e5m2"), true).matmul_staging, -1);
  // Every block kept in BF16: no FP8 products, no staging.
  Config bf16_blocks = staging_config("fp8", "e5m2");
  bf16_blocks.precision.fp8_bf16_layers = 2;
  EXPECT_EQ(plan(bf16_blocks, true).matmul_staging, -1);
}

TEST(Fp8Staging, TheLedgerCountsItAmongTheTemporaries) {
  const Config c = staging_config("fp8", "e5m2");
  const RecomputePolicy none = resolve_recompute(c.recompute, c.model.n_layer);
  BackendCapabilities stages;
  stages.stages_fp8_operands = true;
  const MemoryLedger with = ledger_for(c, none, kB, stages), without = ledger_for(c, none, kB, BackendCapabilities{});
  const int scratch = static_cast<int>(ActivationUse::Scratch);
  EXPECT_EQ(with.activation[scratch] - without.activation[scratch],
            ArenaLayout::aligned(staging_bytes(plan(c, true))));
  EXPECT_EQ(with.backend_workspace, without.backend_workspace);
}

}  // namespace
}  // namespace gpt::test
