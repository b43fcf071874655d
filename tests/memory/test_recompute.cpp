// Recomputation must not change a single bit of the gradients, the ledger must be exactly what the
// step uses, and the FLOP overhead the planner reports must be what the model executes.
#include "memory/arena_usage.h"
#include "memory/ledger.h"
#include "memory/plan_report.h"
#include "memory/planner.h"
#include "model/gpt.h"
#include "optim/adamw.h"

#include "cpu/gradcheck.h"
#include "test_util.h"
#include "train_util.h"

#include <gtest/gtest.h>

#include <cmath>

namespace gpt::test {
namespace {

// A backend whose narrow formats would take FP32's size: the planner may not lower the precision there.
const BackendCapabilities kWideOnly{true, false, 0};

RecomputePolicy policy_from(const std::string& mode, std::vector<std::string> ops, const std::string& every,
                            const std::string& layers, int n_layer) {
  RecomputeConfig c;
  c.mode = mode;
  c.ops = std::move(ops);
  c.every = every;
  c.layers = layers;
  return resolve_recompute(c, n_layer);
}

std::vector<RecomputePolicy> all_policies(int L) {
  std::vector<RecomputePolicy> out = {policy_from("none", {}, "1", "all", L)};
  const std::vector<std::vector<std::string>> subsets = {{"attention"}, {"gelu"}, {"layernorm"}, {"attention", "gelu"},
                                                         {"attention", "layernorm"}, {"gelu", "layernorm"},
                                                         {"attention", "gelu", "layernorm"}};
  for (const auto& ops : subsets) out.push_back(policy_from("selective", ops, "1", "all", L));
  for (const char* every : {"1", "2", "3", "auto"}) out.push_back(policy_from("full", {}, every, "all", L));
  out.push_back(policy_from("full", {}, "2", "3", L));
  out.push_back(policy_from("selective", {"attention", "gelu", "layernorm"}, "1", "2", L));
  return out;
}

// Five optimizer steps of two micro-batches each with dropout 0.2 on a 5-block model, under a
// mixed-precision recipe the model emulates.
TrainResult train_five_steps(const RecomputePolicy& policy, const PrecisionRecipe& recipe = {}) {
  ModelConfig m = tiny_model(23, 5, 16, 2, 8);
  m.dropout = 0.2;
  return train_steps(cpu_backend(), {m, 2, 8, 2, 5}, policy, recipe);
}

TEST(Recompute, EveryModeGivesBitwiseIdenticalGradientsAndLosses) {
  const int L = 5;
  const TrainResult reference = train_five_steps(policy_from("none", {}, "1", "all", L));
  for (const RecomputePolicy& policy : all_policies(L)) {
    SCOPED_TRACE(policy.describe());
    const TrainResult r = train_five_steps(policy);
    expect_bitwise_equal_runs(r, reference);
  }
}

// The low-precision recipes: bf16 (also with BF16 gradients), fp16, and fp8 with delayed scaling and
// E5M2 gradients (first and last block in BF16) and with current scaling and BF16 gradients.
std::vector<std::pair<std::string, PrecisionRecipe>> low_precision_recipes() {
  std::vector<std::pair<std::string, PrecisionRecipe>> out;
  PrecisionRecipe r;
  r.recipe = RecipeKind::Bf16;
  out.emplace_back("bf16", r);
  r.grad_dtype = DType::BF16;
  out.emplace_back("bf16, bf16 gradients", r);
  r = {};
  r.recipe = RecipeKind::Fp16;
  out.emplace_back("fp16", r);
  r = {};
  r.recipe = RecipeKind::Fp8;
  r.fp8.backward = Fp8Backward::E5M2;
  r.fp8.scaling.amax_history = 3;
  r.fp8.bf16_layers = {0, -1};
  out.emplace_back("fp8 delayed e5m2", r);
  r = {};
  r.recipe = RecipeKind::Fp8;
  r.fp8.backward = Fp8Backward::Bf16;
  r.fp8.scaling.mode = Fp8ScalingMode::Current;
  out.emplace_back("fp8 current bf16", r);
  return out;
}

// Under every recipe each recomputed activation is rounded (or cast to FP8, with the step's scale) like
// the stored one, so the gradients stay bit for bit those of no recomputation under the same recipe
// (and differ from FP32's).
TEST(Recompute, EveryModeUnderEachRecipeGivesBitwiseIdenticalGradients) {
  const int L = 5;
  const TrainResult fp32 = train_five_steps(policy_from("none", {}, "1", "all", L));
  for (const auto& [name, recipe] : low_precision_recipes()) {
    SCOPED_TRACE(name);
    const TrainResult reference = train_five_steps(policy_from("none", {}, "1", "all", L), recipe);
    EXPECT_NE(reference.losses, fp32.losses);
    for (const RecomputePolicy& policy : all_policies(L)) {
      SCOPED_TRACE(policy.describe());
      const TrainResult r = train_five_steps(policy, recipe);
      expect_bitwise_equal_runs(r, reference);
      EXPECT_EQ(r.measured, r.planned);
    }
  }
}

TEST(Recompute, LedgerActivationBytesEqualTheMeasuredUse) {
  const int L = 5;
  uint64_t none_bytes = 0;
  for (const RecomputePolicy& policy : all_policies(L)) {
    SCOPED_TRACE(policy.describe());
    const TrainResult r = train_five_steps(policy);
    EXPECT_EQ(r.measured, r.planned);
    if (policy.mode == RecomputeMode::None) none_bytes = r.planned;
    else EXPECT_LT(r.planned, none_bytes);
  }
}

TEST(Recompute, CountedFlopsMatchThePlan) {
  const int L = 5;
  ModelConfig m = tiny_model(23, L, 16, 2, 8);
  for (const RecomputePolicy& policy : all_policies(L)) {
    SCOPED_TRACE(policy.describe());
    const TrainResult r = train_five_steps(policy);
    const StepFlops planned = step_flops(m, 2, 8, policy);
    // Two micro-batches in the step.
    EXPECT_DOUBLE_EQ(r.first_flops.forward, 2 * planned.forward);
    EXPECT_DOUBLE_EQ(r.first_flops.backward, 2 * planned.backward);
    EXPECT_DOUBLE_EQ(r.first_flops.recompute, 2 * planned.recompute);
  }
  // none = one forward; full every 1 = two forwards minus the LM head; selective in between.
  const StepFlops none = step_flops(m, 2, 8, policy_from("none", {}, "1", "all", L));
  const StepFlops full = step_flops(m, 2, 8, policy_from("full", {}, "1", "all", L));
  const StepFlops selective = step_flops(m, 2, 8, policy_from("selective", {"attention"}, "1", "all", L));
  const double head = 2.0 * 2 * 8 * 16 * m.padded_vocab_size();
  EXPECT_EQ(none.recompute, 0.0);
  EXPECT_DOUBLE_EQ(full.recompute, none.forward - head);
  EXPECT_GT(selective.recompute, 0.0);
  EXPECT_LT(selective.recompute, full.recompute);
}

// Full recomputation every k keeps ceil(L/k) segment inputs plus k-1 segment outputs plus one
// block's internals: memory follows k + L/k, minimised at k = sqrt(L) = 4 for 16 blocks.
TEST(Recompute, FullEveryKFollowsKPlusLOverK) {
  const int L = 16;
  ModelConfig m = tiny_model(64, L, 32, 4, 32);
  const PrecisionLayout fp32({}, L);
  const uint64_t block_input = ArenaLayout::aligned(2 * 32 * 32 * 4);
  const uint64_t k1 = plan_activations(m, fp32, {2, 32}, true, policy_from("full", {}, "1", "all", L)).total_bytes();
  std::vector<uint64_t> bytes;
  for (int k = 1; k <= L; ++k) {
    const uint64_t total =
        plan_activations(m, fp32, {2, 32}, true, policy_from("full", {}, std::to_string(k), "all", L)).total_bytes();
    const int64_t units = (L + k - 1) / k + (k - 1) - L;  // relative to k = 1, which keeps L inputs
    EXPECT_EQ(static_cast<int64_t>(total) - static_cast<int64_t>(k1), units * static_cast<int64_t>(block_input)) << "k=" << k;
    bytes.push_back(total);
  }
  const auto best = std::min_element(bytes.begin(), bytes.end()) - bytes.begin() + 1;
  EXPECT_EQ(best, 4);
  EXPECT_EQ(auto_recompute_every(L), 4);
}

// The ledger's per-block formula is the plan's per-block allocation, and under the paper's
// assumptions it is Korthikanti et al.'s sbh(34 + 5as/h) (plus the LayerNorm statistics, which the
// paper leaves out); full recomputation keeps 2sbh per block in 16 bits.
TEST(Recompute, BlockFormulaMatchesThePlanAndThePaper) {
  const double s = 32, b = 2, h = 48, a = 4;
  ModelConfig m = tiny_model(64, 3, 48, 4, 32);
  const ActivationPlan plan = plan_activations(m, PrecisionLayout({}, 3), {2, 32}, true, policy_from("none", {}, "1", "all", 3));
  uint64_t block1 = 0;
  for (int k = 0; k < kBlockTensors; ++k) block1 += plan.layout.buffer(static_cast<size_t>(plan.block_buffer[1][k])).bytes;
  ActivationFormula ours{4, 4, 0, false};
  EXPECT_EQ(static_cast<double>(block1), block_activation_bytes(ours, s, b, h, a));

  ActivationFormula paper{2, 0, 1, true};
  EXPECT_DOUBLE_EQ(block_activation_bytes(paper, s, b, h, a), s * b * h * (34 + 5 * a * s / h));

  PrecisionRecipe bf16;
  bf16.recipe = RecipeKind::Bf16;
  const ActivationPlan full16 =
      plan_activations(m, PrecisionLayout(bf16, 3), {2, 32}, true, policy_from("full", {}, "1", "all", 3));
  for (int l = 0; l < 3; ++l)
    EXPECT_EQ(full16.layout.buffer(static_cast<size_t>(full16.block_buffer[l][static_cast<int>(BlockTensor::Out)])).bytes,
              2 * s * b * h);
}

TEST(Recompute, FusedAttentionMakesSelectiveAttentionFree) {
  ModelConfig m = tiny_model(64, 3, 48, 4, 32);
  const auto none = policy_from("none", {}, "1", "all", 3);
  const auto attention = policy_from("selective", {"attention"}, "1", "all", 3);
  const PrecisionLayout fp32({}, 3);
  EXPECT_EQ(plan_activations(m, fp32, {2, 32}, false, none).total_bytes(),
            plan_activations(m, fp32, {2, 32}, false, attention).total_bytes());
  EXPECT_GT(plan_activations(m, fp32, {2, 32}, true, none).total_bytes(),
            plan_activations(m, fp32, {2, 32}, true, attention).total_bytes());
  EXPECT_EQ(step_flops(m, 2, 32, attention, false).recompute, 0.0);
  EXPECT_GT(step_flops(m, 2, 32, attention, true).recompute, 0.0);
}

// The fused attention's plan: per block a [B,NH,T] FP32 log-sum-exp where the materialised one keeps the
// [B,NH,T,T] probabilities, and a [B,NH,T] backward scratch for the [B,NH,T,T] one; `gpt-train plan` says so.
TEST(Recompute, FusedAttentionPlansTheLogSumExpInsteadOfTheProbabilities) {
  ModelConfig m = tiny_model(64, 3, 48, 4, 32);
  const auto none = policy_from("none", {}, "1", "all", 3);
  const ActivationPlan fused = plan_activations(m, PrecisionLayout({}, 3), {2, 32}, false, none);
  const ActivationPlan materialised = plan_activations(m, PrecisionLayout({}, 3), {2, 32}, true, none);
  const ArenaBuffer& lse = fused.layout.buffer(fused.layout.index_of("block2.lse"));
  EXPECT_EQ(lse.bytes, 2u * 4 * 32 * 4);
  EXPECT_EQ(lse.dtype, DType::F32);
  EXPECT_EQ(materialised.layout.buffer(materialised.layout.index_of("block2.probs")).bytes, 2u * 4 * 32 * 32 * 4);
  const std::string dprobs = model_tensor_name(ModelTensor::DProbs);
  EXPECT_EQ(fused.layout.buffer(fused.layout.index_of(dprobs)).bytes, 2u * 4 * 32 * 4);

  Config c;
  c.model = m;
  c.train.batch_size = 2;
  c.train.seq_len = 32;
  BackendCapabilities caps;
  caps.attention_keeps_probs = false;
  const std::string report = plan_report(c, std::nullopt, caps);
  EXPECT_NE(report.find("attention does not store scores"), std::string::npos) << report;
  EXPECT_NE(report.find("attention is fused"), std::string::npos) << report;
}

TEST(MemoryPlanner, PicksAPlanThatFitsInTheDocumentedOrder) {
  Config c;
  c.model = tiny_model(256, 8, 64, 4, 128);
  c.train.batch_size = 8;
  c.train.seq_len = 128;
  c.train.grad_accum_steps = 2;
  const uint64_t as_given = ledger_for(c, resolve_recompute(c.recompute, 8), 8, BackendCapabilities{}).total();

  // The whole global batch of 16 sequences in one micro-batch when it fits; else the largest that does.
  const uint64_t one_batch = ledger_for(c, resolve_recompute(c.recompute, 8), 16, BackendCapabilities{}).total();
  MemoryChoice roomy = choose_memory_plan(c, one_batch, kWideOnly);
  EXPECT_EQ(roomy.batch_size, 16);
  EXPECT_EQ(roomy.grad_accum_steps, 1);
  MemoryChoice given = choose_memory_plan(c, as_given, kWideOnly);
  EXPECT_EQ(given.batch_size, 8);
  EXPECT_EQ(given.grad_accum_steps, 2);
  EXPECT_EQ(given.policy.mode, RecomputeMode::None);

  const uint64_t smallest_none = ledger_for(c, resolve_recompute(c.recompute, 8), 1, BackendCapabilities{}).total();
  MemoryChoice accumulate = choose_memory_plan(c, smallest_none, kWideOnly);
  EXPECT_EQ(accumulate.policy.mode, RecomputeMode::None);
  EXPECT_EQ(accumulate.batch_size, 1);
  EXPECT_EQ(accumulate.grad_accum_steps, 16);

  MemoryChoice recompute = choose_memory_plan(c, smallest_none - 1, kWideOnly);
  EXPECT_NE(recompute.policy.mode, RecomputeMode::None);
  EXPECT_LE(recompute.ledger.total(), smallest_none - 1);
  EXPECT_EQ(recompute.batch_size * recompute.grad_accum_steps, 16);

  try {
    choose_memory_plan(c, 1 << 20, kWideOnly);
    ADD_FAILURE() << "a 1 MiB budget cannot fit";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("raise memory.budget to at least"), std::string::npos) << e.what();
  }
}


// Where narrow formats take their own size (a GPU), an fp32 run whose batch does not fit is first moved
// to bf16 before any accumulation or recomputation; where they do not (the CPU's emulation), precision is
// left alone and accumulation is chosen instead. A recipe other than fp32 is never changed.
TEST(MemoryPlanner, LowersThePrecisionFirstWhereThatSavesMemory) {
  Config c;
  c.model = tiny_model(256, 8, 64, 4, 512);
  c.train.batch_size = 8;
  c.train.seq_len = 512;  // long sequences: activations dominate, so bf16 is smaller despite its weight copy
  const RecomputePolicy none = resolve_recompute(c.recompute, 8);
  Config bf16 = c;
  bf16.precision.recipe = "bf16";
  const uint64_t fp32_total = ledger_for(c, none, 8, BackendCapabilities{}).total(), bf16_total = ledger_for(bf16, none, 8, BackendCapabilities{}).total();
  ASSERT_LT(bf16_total, fp32_total);

  const MemoryChoice lowered = choose_memory_plan(c, bf16_total, BackendCapabilities{});
  EXPECT_EQ(lowered.recipe, "bf16");
  EXPECT_EQ(lowered.batch_size, 8);
  EXPECT_EQ(lowered.policy.mode, RecomputeMode::None);
  EXPECT_NE(lowered.reason.find("fits in bf16 but not in fp32"), std::string::npos) << lowered.reason;

  const MemoryChoice emulated = choose_memory_plan(c, bf16_total, kWideOnly);
  EXPECT_EQ(emulated.recipe, "fp32");
  EXPECT_LT(emulated.batch_size, 8);
  EXPECT_EQ(emulated.batch_size * emulated.grad_accum_steps, 8);

  const MemoryChoice roomy = choose_memory_plan(c, fp32_total, BackendCapabilities{});
  EXPECT_EQ(roomy.recipe, "fp32");
  EXPECT_EQ(roomy.batch_size, 8);

  Config fp16 = c;
  fp16.precision.recipe = "fp16";
  EXPECT_EQ(choose_memory_plan(fp16, bf16_total, BackendCapabilities{}).recipe, "fp16");
}
}  // namespace
}  // namespace gpt::test
