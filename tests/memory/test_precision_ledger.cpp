// What each precision recipe takes, by the ledger (16-bit activations and weight copy; FP8 inputs and
// weights at 1 byte), against byte counts worked out by hand, and against what the CPU backend allocates,
// which stores every tensor at the size of its format.
#include "memory/ledger.h"
#include "memory/planner.h"
#include "model/gpt.h"
#include "layout/parameter_layout.h"
#include "cpu/cpu_backend.h"

#include "test_util.h"

#include <gtest/gtest.h>

namespace gpt::test {
namespace {

Config ledger_config(const std::string& recipe) {
  Config c;
  c.model = tiny_model(64, 4, 64, 4, 32);
  c.train.batch_size = 2;
  c.train.seq_len = 32;
  c.precision.recipe = recipe;
  return c;
}

MemoryLedger ledger(const Config& c) { return ledger_for(c, resolve_recompute(c.recompute, c.model.n_layer), 2, BackendCapabilities{}); }

TEST(PrecisionLedger, Fp8InputsWeightsAndGradientBufferAreCountedAtOneByte) {
  const Config bf16 = ledger_config("bf16");
  Config fp8 = ledger_config("fp8");
  fp8.precision.fp8_bf16_layers = 1;  // blocks 0 and 3 stay BF16: blocks 1 and 2 are FP8
  const MemoryLedger b = ledger(bf16), f = ledger(fp8);
  const uint64_t B = 2, T = 32, C = 64, fp8_blocks = 2;
  const auto aligned = [](uint64_t bytes) { return ArenaLayout::aligned(bytes); };
  // Per FP8 block, ln1, atty and ln2 ([B,T,C]) and fch_gelu ([B,T,4C]) drop from 2 bytes to 1.
  const uint64_t saved_per_block = 3 * (aligned(2 * B * T * C) - aligned(B * T * C)) +
                                   (aligned(2 * B * T * 4 * C) - aligned(B * T * 4 * C));
  EXPECT_EQ(b.activation[static_cast<int>(ActivationUse::BlockStored)] -
                f.activation[static_cast<int>(ActivationUse::BlockStored)],
            fp8_blocks * saved_per_block);
  EXPECT_EQ(b.activations() - f.activations(), fp8_blocks * saved_per_block);  // BF16 backward: no E5M2 buffer
  EXPECT_EQ(b.compute_weights - f.compute_weights, fp8_blocks * 12 * C * C);
  EXPECT_EQ(f.parameters, b.parameters);
  EXPECT_EQ(f.gradients, b.gradients);

  fp8.precision.fp8_backward = "e5m2";
  EXPECT_EQ(ledger(fp8).activations() - f.activations(), aligned(B * T * 4 * C));  // fp8.output_grad, E5M2
}

TEST(PrecisionLedger, LowPrecisionGradientsHalveTheGradients) {
  Config c = ledger_config("bf16");
  const MemoryLedger f32 = ledger(c);
  c.precision.grad_dtype = "bf16";
  const MemoryLedger bf16 = ledger(c);
  EXPECT_EQ(f32.gradients, ParameterLayout(c.model, DType::F32).arena_layout().total_bytes());
  EXPECT_EQ(bf16.gradients, ParameterLayout(c.model, DType::BF16).arena_layout().total_bytes());
  EXPECT_LT(bf16.gradients, f32.gradients * 51 / 100);
  EXPECT_EQ(bf16.total() + (f32.gradients - bf16.gradients), f32.total());
}

// The model's arenas on the CPU are the ledger's rows, byte for byte, for every recipe; bf16 block
// outputs take half of fp32's.
TEST(PrecisionLedger, TheCpuAllocatesWhatTheLedgerPlans) {
  cpu::CpuBackend backend(1);
  MemoryLedger fp32_ledger;
  for (const char* variant : {"fp32", "bf16", "fp16", "fp8", "fp8-e5m2-current", "bf16-grads"}) {
    SCOPED_TRACE(variant);
    const std::string name = variant;
    Config c = ledger_config(name.starts_with("fp8") ? "fp8" : name == "bf16-grads" ? "bf16" : name);
    if (name == "fp8-e5m2-current") {
      c.precision.fp8_backward = "e5m2";
      c.precision.fp8_scaling = "current";
      c.precision.fp8_bf16_layers = 1;
    }
    if (name == "bf16-grads") c.precision.grad_dtype = "bf16";
    const RecomputePolicy policy = resolve_recompute(c.recompute, c.model.n_layer);
    const MemoryLedger planned = ledger(c);
    GPT model(c.model, c.train.batch_size, c.train.seq_len, backend, DType::F32, policy, precision_recipe(c.precision));
    EXPECT_EQ(model.activation_arena().layout().total_bytes(), planned.activations());
    EXPECT_EQ(model.gradient_arena().layout().total_bytes(), planned.gradients);
    EXPECT_EQ(model.parameter_arena().layout().total_bytes(), planned.parameters);
    if (name == "fp32") {
      EXPECT_EQ(planned.compute_weights, 0u);
      fp32_ledger = planned;
      EXPECT_EQ(model.compute_weight_arena(), nullptr);
    } else {
      ASSERT_NE(model.compute_weight_arena(), nullptr);
      EXPECT_EQ(model.compute_weight_arena()->layout().total_bytes(), planned.compute_weights);
      EXPECT_LE(planned.compute_weights, planned.parameters / 2 + 256 * 4 * c.model.n_layer * 12);
    }
    if (model.fp8()) {
      EXPECT_EQ(model.fp8()->device_bytes(), planned.fp8_state);
      EXPECT_GT(planned.fp8_state, 0u);
    } else {
      EXPECT_EQ(planned.fp8_state, 0u);
    }
    if (name == "bf16")
      EXPECT_EQ(2 * planned.activation[static_cast<int>(ActivationUse::BlockInput)],
                fp32_ledger.activation[static_cast<int>(ActivationUse::BlockInput)]);
  }
}

}  // namespace
}  // namespace gpt::test
