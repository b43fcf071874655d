#include "memory/planner.h"

#include "core/error.h"
#include "model/parameters.h"
#include "precision/recipe.h"

#include <fmt/format.h>

namespace gpt {

MemoryLedger ledger_for(const Config& config, const RecomputePolicy& policy, int batch_size, bool keeps_probs) {
  // Mixed precision: activations in the compute dtype, plus the compute copy of the weights, as the GPU
  // lays them out (the CPU backend emulates the rounding in F32 storage). Masters, gradients and AdamW
  // state stay FP32.
  // fp8: the FP8 blocks' linear inputs and weights take 1 byte per value (the transposed FP8 copies a
  // Hopper FP8 GEMM needs in backward are not planned yet: the CUDA backend will add its workspace).
  // grad_dtype BF16/F16 halves the gradients.
  const PrecisionRecipe recipe = precision_recipe(config.precision);
  const DType compute = recipe.compute_dtype();
  ActivationShape shape;
  shape.batch_size = batch_size;
  shape.seq_len = config.train.seq_len;
  shape.dtype = compute;
  shape.keeps_probs = keeps_probs;
  set_fp8_fields(shape, recipe, config.model.n_layer);
  const ActivationPlan plan = plan_activations(config.model, shape, policy);
  MemoryLedger ledger = memory_ledger(config.model, plan, DType::F32);
  if (compute != DType::F32) {
    ledger.compute_weights = ParameterLayout(config.model, compute).arena_layout().total_bytes();
    const int64_t C = config.model.n_embd;
    for (int l = 0; l < config.model.n_layer; ++l)
      if (recipe.layer_uses_fp8(l, config.model.n_layer))  // qkv 3C^2, attention projection C^2, fc and fc proj 4C^2
        ledger.compute_weights -= static_cast<uint64_t>(12 * C * C) * (dtype_size(compute) - 1);
  }
  if (recipe.grad_dtype != DType::F32)
    ledger.gradients = ParameterLayout(config.model, recipe.grad_dtype).arena_layout().total_bytes();
  return ledger;
}

std::vector<RecomputePolicy> standard_policies(int n_layer) {
  std::vector<RecomputePolicy> out;
  RecomputePolicy none;
  none.layers = n_layer;
  out.push_back(none);
  for (int ops = 1; ops <= 4; ++ops) {
    RecomputePolicy p = none;
    p.mode = RecomputeMode::Selective;
    p.attention = ops == 1 || ops == 4;
    p.gelu = ops == 2 || ops == 4;
    p.layernorm = ops == 3 || ops == 4;
    out.push_back(p);
  }
  for (int every : {1, auto_recompute_every(n_layer)}) {
    RecomputePolicy p = none;
    p.mode = RecomputeMode::Full;
    p.every = every;
    out.push_back(p);
    if (auto_recompute_every(n_layer) == 1) break;
  }
  return out;
}

MemoryChoice choose_memory_plan(const Config& config, uint64_t budget, bool keeps_probs) {
  const int L = config.model.n_layer;
  const int sequences = config.train.batch_size * config.train.grad_accum_steps;
  std::vector<RecomputePolicy> order;
  RecomputePolicy p;
  p.layers = L;
  order.push_back(p);
  p.mode = RecomputeMode::Selective;
  p.attention = p.gelu = p.layernorm = true;
  order.push_back(p);
  for (int k = 1; k <= L; ++k) {
    RecomputePolicy full;
    full.mode = RecomputeMode::Full;
    full.every = k;
    full.layers = L;
    order.push_back(full);
  }
  MemoryChoice smallest;
  bool have_smallest = false;
  for (const RecomputePolicy& policy : order) {
    for (int b = sequences; b >= 1; --b) {
      if (sequences % b != 0) continue;
      MemoryLedger ledger = ledger_for(config, policy, b, keeps_probs);
      if (ledger.total() <= budget) {
        MemoryChoice c{b, sequences / b, policy, ledger, ""};
        c.reason = fmt::format(
            "memory.budget {}: micro-batch {} x {} accumulated {} times with recompute {} needs {}; "
            "{}",
            format_bytes(budget), b, config.train.seq_len, c.grad_accum_steps, policy.describe(),
            format_bytes(ledger.total()),
            policy.mode == RecomputeMode::None
                ? (b == sequences ? "the configured batch fits as it is" : "a smaller micro-batch with more accumulation fits without recomputation")
                : "no micro-batch fits without recomputing, so the cheapest recomputation that fits was chosen");
        return c;
      }
      if (!have_smallest || ledger.total() < smallest.ledger.total()) {
        smallest = MemoryChoice{b, sequences / b, policy, ledger, ""};
        have_smallest = true;
      }
    }
  }
  GPT_FAIL("memory.budget: {} is below the smallest plan for this model and global batch, which needs {} "
           "(micro-batch {} accumulated {} times, recompute {}); raise memory.budget to at least {} or shrink the model",
           format_bytes(budget), format_bytes(smallest.ledger.total()), smallest.batch_size, smallest.grad_accum_steps,
           smallest.policy.describe(), format_bytes(smallest.ledger.total()));
}

}  // namespace gpt
