// LoRA in the model: the adapters' gradients against finite differences, step 0 equal to the base, the
// merged weights against base + (alpha/rank) B A and against the unmerged model's logits, recompute modes.
#include "model/gpt.h"

#include "cpu/gradcheck.h"
#include "io/lora_adapters.h"
#include "memory/planner.h"
#include "model/model_test_util.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

namespace gpt::test {
namespace {

LoraSpec all_targets(int rank, double alpha, double dropout = 0.0) {
  LoraSpec s;
  s.rank = rank;
  s.alpha = alpha;
  s.dropout = dropout;
  s.targets = {true, true, true, true};
  return s;
}

std::vector<unsigned char> raw_bytes(Arena& arena) {
  const auto* p = static_cast<const unsigned char*>(arena.base());
  return std::vector<unsigned char>(p, p + arena.layout().total_bytes());
}

// A and B of every target in double precision against central finite differences, with the model's
// dropout and the adapters' own dropout on (the masks are fixed by the step context) and two targets masked.
// B is perturbed away from its zero start, else A's gradient would be zero and prove nothing.
TEST(LoraGradient, AdaptersMatchFiniteDifferencesInDouble) {
  ModelConfig m = tiny_model();
  m.dropout = 0.1;
  const GradientCheckBatch batch(m);
  GPT model(m, batch.B, batch.T, cpu_backend(), DType::F64, {}, {}, all_targets(2, 3.0, 0.2));
  model.init_weights(3);
  perturb(*model.base_arena(), 100, 0.3);
  perturb(model.parameter_arena(), 200, 0.5);
  const std::vector<double> analytic = batch.gradients(model);
  const FiniteDifferences fd = finite_differences(model, batch, analytic, 20);
  Arena& params = model.parameter_arena();
  ASSERT_EQ(params.layout().buffers().size(), 8u);  // A and B of four targets
  ASSERT_GT(fd.numeric.size(), 150u);
  EXPECT_LT(max_normwise_error(fd.analytic, fd.numeric), 1e-7);
  // Every adapter tensor carries a gradient (none is silently skipped).
  size_t offset = 0;
  for (size_t i = 0; i < params.layout().buffers().size(); ++i) {
    const auto count = static_cast<size_t>(params.tensor(i).numel());
    double norm = 0.0;
    for (size_t j = 0; j < count; ++j) norm += analytic[offset + j] * analytic[offset + j];
    EXPECT_GT(norm, 1e-12) << params.layout().buffer(i).name;
    offset += count;
  }
}

// B starts at zero, so a fresh LoRA model computes exactly what its base computes.
TEST(LoraModel, StepZeroEqualsTheBaseModelBitwise) {
  const ModelConfig m = tiny_model(37, 2, 16, 4, 12);
  const int B = 2, T = 7;
  GPT full(m, B, T, cpu_backend());
  full.init_weights(11);
  GPT lora(m, B, T, cpu_backend(), DType::F32, {}, {}, all_targets(4, 8.0));
  lora.base_from_host(full.parameters_to_host());
  lora.init_adapters(5);
  const std::vector<int32_t> tokens = random_tokens(B * T, m.vocab_size, 9);
  const StepContext ctx{1, 0, 0, false};
  full.forward(tokens, {}, B, T, ctx);
  lora.forward(tokens, {}, B, T, ctx);
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < T; ++t) ASSERT_EQ(full.logits_at(b, t), lora.logits_at(b, t)) << b << "," << t;
}

// The merged weights are base + (alpha/rank) B A, element by element (recomputed here in double), and a
// plain model holding them gives the unmerged LoRA model's logits within FP32 rounding (1e-5 relative: the
// two sum the same products in another order).
TEST(LoraMerge, MergedWeightsAreBasePlusScaledProductAndGiveTheSameLogits) {
  const ModelConfig m = tiny_model(37, 2, 16, 4, 12);
  const int B = 2, T = 7, rank = 3;
  const double alpha = 6.0;
  const LoraSpec spec = all_targets(rank, alpha);
  GPT lora(m, B, T, cpu_backend(), DType::F32, {}, {}, spec);
  lora.init_weights(21);
  perturb(lora.parameter_arena(), 300, 0.2);
  const std::vector<float> base = lora.base_to_host();
  const std::vector<float> merged = merged_parameters(base, lora);

  // fcw of block 1: [4C, C] at its offset in llm.c order; A [r, C] and B [4C, r] from the adapter arena.
  const ParameterLayout& layout = lora.base_layout();
  size_t offset = 0;
  for (const ArenaBuffer& b : layout.arena_layout().buffers()) {
    if (b.name == "fcw") break;
    offset += b.bytes / sizeof(float);
  }
  const int64_t C = m.n_embd, out = 4 * C;
  offset += static_cast<size_t>(out * C);  // block 1
  const Tensor a = lora.parameter_arena().tensor("fcw.lora_a")[1], bt = lora.parameter_arena().tensor("fcw.lora_b")[1];
  for (int64_t o = 0; o < out; ++o) {
    for (int64_t i = 0; i < C; ++i) {
      double delta = 0.0;
      for (int k = 0; k < rank; ++k) delta += static_cast<double>(bt.f32()[o * rank + k]) * a.f32()[k * C + i];
      const size_t at = offset + static_cast<size_t>(o * C + i);
      ASSERT_NEAR(merged[at], base[at] + alpha / rank * delta, 1e-6) << o << "," << i;
    }
  }
  size_t changed = 0;
  for (size_t i = 0; i < base.size(); ++i) changed += merged[i] != base[i];
  EXPECT_GT(changed, base.size() / 4);

  GPT plain(m, B, T, cpu_backend());
  plain.parameters_from_host(merged);
  const std::vector<int32_t> tokens = random_tokens(B * T, m.vocab_size, 4);
  const StepContext ctx{1, 0, 0, false};
  lora.forward(tokens, {}, B, T, ctx);
  plain.forward(tokens, {}, B, T, ctx);
  for (int b = 0; b < B; ++b) {
    for (int t = 0; t < T; ++t) {
      const std::vector<float> x = lora.logits_at(b, t), y = plain.logits_at(b, t);
      double diff = 0.0, scale = 0.0;
      for (size_t v = 0; v < x.size(); ++v) {
        diff = std::max(diff, std::abs(static_cast<double>(x[v]) - y[v]));
        scale = std::max(scale, std::abs(static_cast<double>(y[v])));
      }
      EXPECT_LT(diff / scale, 1e-5) << b << "," << t;
    }
  }
}

// A backward changes no byte of the frozen base and fills only the adapters' gradients; every recompute
// mode gives the same adapter gradients bit for bit (the adapters' inputs and dropout masks are rebuilt
// exactly), and issues the FLOPs the plan counts for it.
TEST(LoraModel, RecomputeModesGiveBitwiseEqualAdapterGradients) {
  ModelConfig m = tiny_model(37, 4, 16, 4, 12);
  m.dropout = 0.1;
  const int B = 2, T = 9;
  const std::vector<int32_t> tokens = random_tokens(B * T, m.vocab_size, 1);
  const std::vector<int32_t> targets = random_tokens(B * T, m.vocab_size, 2);
  const StepContext ctx{7, 2, 0, true};
  std::vector<RecomputePolicy> policies(4);
  for (RecomputePolicy& p : policies) p.layers = m.n_layer;
  policies[1].mode = RecomputeMode::Selective;
  policies[1].attention = policies[1].gelu = policies[1].layernorm = true;
  policies[2].mode = RecomputeMode::Full;
  policies[2].every = 1;
  policies[3].mode = RecomputeMode::Full;
  policies[3].every = 2;
  std::vector<float> reference;
  for (const RecomputePolicy& policy : policies) {
    SCOPED_TRACE(policy.describe());
    GPT model(m, B, T, cpu_backend(), DType::F32, policy, {}, all_targets(4, 8.0, 0.1));
    model.init_weights(3);
    perturb(model.parameter_arena(), 50, 0.1);
    const std::vector<unsigned char> base_before = raw_bytes(*model.base_arena());
    model.zero_grads();
    model.forward(tokens, targets, B, T, ctx, 1.0f / static_cast<float>(B * T));
    model.backward(ctx);
    EXPECT_EQ(raw_bytes(*model.base_arena()), base_before);
    // The FLOPs the plan counts for a LoRA step (no weight gradients of the frozen weights, the adapters'
    // products) are those the model issued, recomputation included.
    const StepFlops planned = step_flops(m, B, T, policy, true, all_targets(4, 8.0, 0.1));
    EXPECT_DOUBLE_EQ(model.flops().forward, planned.forward);
    EXPECT_DOUBLE_EQ(model.flops().backward, planned.backward);
    EXPECT_DOUBLE_EQ(model.flops().recompute, planned.recompute);
    const Tensor g = model.gradients_flat();
    const std::vector<float> grads(g.f32(), g.f32() + g.numel());
    EXPECT_GT(model.gradient_norm_squared(), 0.0);
    if (reference.empty()) reference = grads;
    else EXPECT_EQ(grads, reference);
  }
}

// What GPT allocates under LoRA is what the ledger plans: adapters' masters, gradients and compute copy,
// the frozen base in the compute format, the products' scratch, and no FP32 copy or gradient of the base.
TEST(LoraLedger, PlannedBytesAreTheModelsArenas) {
  Config c;
  c.model = tiny_model(37, 2, 16, 4, 12);
  c.train.batch_size = 2;
  c.train.seq_len = 9;
  c.finetune.lora_rank = 4;
  c.finetune.lora_dropout = 0.1;
  c.finetune.lora_targets = {"qkv", "fc_proj"};
  c.precision.recipe = "bf16";
  RecomputePolicy none;
  none.layers = c.model.n_layer;
  const MemoryLedger ledger = ledger_for(c, none, c.train.batch_size, {});
  GPT model(c.model, c.train.batch_size, c.train.seq_len, cpu_backend(), DType::F32, none,
            precision_recipe(c.precision), LoraSpec::from_config(c.finetune));
  EXPECT_EQ(ledger.parameters, model.parameter_arena().layout().total_bytes());
  EXPECT_EQ(ledger.gradients, model.gradient_arena().layout().total_bytes());
  EXPECT_EQ(ledger.optimizer, 2 * ledger.parameters);
  EXPECT_EQ(ledger.frozen_weights, model.base_arena()->layout().total_bytes());
  EXPECT_EQ(ledger.activations(), model.activation_arena().layout().total_bytes());
  EXPECT_EQ(model.compute_weight_arena(), nullptr);
  ASSERT_NE(model.lora_compute_arena(), nullptr);
  EXPECT_EQ(ledger.compute_weights, model.lora_compute_arena()->layout().total_bytes());
  EXPECT_EQ(ledger.adapter_scratch, model.lora_scratch_arena()->layout().total_bytes());
  // The base in BF16: half its FP32 size (up to alignment); the adapters a small share of it.
  const uint64_t fp32_base = ParameterLayout(c.model, DType::F32).arena_layout().total_bytes();
  EXPECT_LT(ledger.frozen_weights, fp32_base * 6 / 10);
  EXPECT_LT(ledger.parameters, fp32_base / 4);
  Config full = c;
  full.finetune.lora_rank = 0;
  const MemoryLedger f = ledger_for(full, none, c.train.batch_size, {});
  EXPECT_LT(ledger.total(), f.total());
  EXPECT_EQ(f.frozen_weights, 0u);
}

}  // namespace
}  // namespace gpt::test
