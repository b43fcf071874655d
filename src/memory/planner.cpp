#include "memory/planner.h"

#include "core/error.h"
#include "layout/lora_layout.h"
#include "layout/parameter_layout.h"
#include "precision/fp8_state.h"
#include "precision/precision_layout.h"
#include "precision/recipe.h"

#include <fmt/format.h>

namespace gpt {

bool masters_on_host(const Config& config) {
  return config.memory.offload == "optimizer" && !config.finetune.lora() &&
         PrecisionLayout(precision_recipe(config.precision), config.model.n_layer).compute_weights();
}

MemoryLedger ledger_for(const Config& config, const RecomputePolicy& policy, int batch_size,
                        const BackendCapabilities& backend) {
  // Every tensor at the size of the format the precision layout gives it, which is what every backend
  // allocates: activations, the compute copy of the weights (E4M3 for FP8 blocks' linear weights) and the
  // gradients in precision.grad_dtype. Masters and AdamW state stay FP32. The transposed FP8 copies a
  // cuBLASLt FP8 product needs are the activation plan's fp8.staging.
  const PrecisionLayout precision(precision_recipe(config.precision), config.model.n_layer);
  const ActivationPlan plan =
      plan_activations(config.model, precision, {batch_size, config.train.seq_len}, backend.attention_keeps_probs,
                       policy, backend.stages_fp8_operands);
  MemoryLedger ledger = memory_ledger(config.model, plan, DType::F32);
  const ParameterLayout masters(config.model, DType::F32);
  if (precision.compute_weights()) ledger.compute_weights = compute_weights_layout(masters, precision).total_bytes();
  if (precision.recipe().recipe == RecipeKind::Fp8) ledger.fp8_state = fp8_state_layout(precision).total_bytes();
  ledger.gradients = ParameterLayout(config.model, precision.gradient()).arena_layout().total_bytes();
  ledger.backend_workspace = backend.reserved_device_bytes +
                             (precision.compute() == DType::F32 ? 0 : backend.narrow_matmul_workspace_bytes);
  if (config.finetune.lora()) {
    // The trained parameters are the adapters (FP32 masters, gradients, AdamW m and v); the base is held once,
    // in the compute format, with no gradients or optimizer state (as GPT allocates it under LoRA).
    const LoraSpec lora = LoraSpec::from_config(config.finetune);
    const auto bytes = [&](DType d) { return lora_parameter_layout(config.model, lora, d).arena_layout().total_bytes(); };
    ledger.parameters = bytes(DType::F32);
    ledger.compute_weights = precision.compute_weights() ? bytes(precision.compute()) : 0;
    ledger.gradients = bytes(precision.gradient());
    ledger.optimizer = 2 * ledger.parameters;
    ledger.frozen_weights = ParameterLayout(config.model, precision.compute()).arena_layout().total_bytes();
    ledger.adapter_scratch = lora_scratch_layout(config.model, lora, static_cast<int64_t>(batch_size) * config.train.seq_len,
                                                 precision.compute(), precision.gradient())
                                 .total_bytes();
  }
  if (config.memory.offload == "optimizer") {
    // The host holds the FP32 masters AdamW updates, a copy of the gradients it reads and the moments; the
    // device the gradients and the activations, and no optimizer state. Its FP32 weights are what the
    // forward reads in fp32; under a narrow recipe they leave the device (masters_on_host), on every rank
    // of a data-parallel run, and the compute copy is made from them as host_masters_path says: from its
    // twin on the host, or under fp8 through a staging buffer on the device.
    ledger.host_parameters = ledger.parameters;
    ledger.host_gradients = ledger.gradients;
    ledger.host_optimizer = ledger.optimizer;
    ledger.optimizer = 0;
    if (masters_on_host(config)) {
      ledger.parameters = 0;
      switch (host_masters_path(precision.recipe().recipe == RecipeKind::Fp8, backend.device_memory_is_host)) {
        case HostMastersPath::Direct: break;
        case HostMastersPath::HostCopy: ledger.host_compute_weights = ledger.compute_weights; break;
        case HostMastersPath::Staging:
          ledger.master_staging = master_staging_layout(masters, config.model.n_layer).total_bytes();
          break;
      }
    }
  }
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

MemoryChoice choose_memory_plan(const Config& config, uint64_t budget, const BackendCapabilities& backend) {
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
  // Lowering the precision changes the numerics least of the levers (bf16 keeps FP32's range and needs no
  // loss scaling), so it is tried first at each micro-batch size; the configured recipe still wins a tie.
  std::vector<std::string> recipes = {config.precision.recipe};
  if (backend.stores_low_precision && config.precision.recipe == "fp32") recipes.push_back("bf16");
  // Offloading moves the optimizer's work to the host's cores and its traffic over the host link every step, so
  // it comes last, after every choice that keeps the state on the device; where the device memory is the host's
  // it frees nothing and is not a choice.
  std::vector<std::string> offloads = {config.memory.offload};
  if (config.memory.offload == "none" && !backend.device_memory_is_host && !config.finetune.lora())
    offloads.push_back("optimizer");
  MemoryChoice smallest;
  bool have_smallest = false;
  for (const std::string& offload : offloads) {
    for (const RecomputePolicy& policy : order) {
      for (int b = sequences; b >= 1; --b) {
        if (sequences % b != 0) continue;
        for (const std::string& recipe : recipes) {
          Config candidate = config;
          candidate.precision.recipe = recipe;
          candidate.memory.offload = offload;
          MemoryLedger ledger = ledger_for(candidate, policy, b, backend);
          if (ledger.total() <= budget) {
            MemoryChoice c{b, sequences / b, policy, recipe, offload, ledger, ""};
            const std::string why =
                offload != config.memory.offload
                    ? "nothing fits with the optimizer on the device, so its FP32 masters and AdamW moments were "
                      "offloaded to host memory"
                : policy.mode != RecomputeMode::None
                    ? "no micro-batch fits without recomputing, so the cheapest recomputation that fits was chosen"
                : b < sequences ? "a smaller micro-batch with more accumulation fits without recomputation"
                : recipe != config.precision.recipe
                    ? fmt::format("the configured batch fits in {} but not in {}", recipe, config.precision.recipe)
                    : "the configured batch fits as it is";
            c.reason = fmt::format("memory.budget {}: micro-batch {} x {} accumulated {} times, precision {}, recompute "
                                   "{}, offload {} needs {}{}; {}",
                                   format_bytes(budget), b, config.train.seq_len, c.grad_accum_steps, recipe,
                                   policy.describe(), offload, format_bytes(ledger.total()),
                                   ledger.host_total() > 0 ? " on the device and " + format_bytes(ledger.host_total()) +
                                                                 " on the host"
                                                           : "",
                                   why);
            return c;
          }
          if (!have_smallest || ledger.total() < smallest.ledger.total()) {
            smallest = MemoryChoice{b, sequences / b, policy, recipe, offload, ledger, ""};
            have_smallest = true;
          }
        }
      }
    }
  }
  GPT_FAIL("memory.budget: {} is below the smallest plan for this model and global batch, which needs {} "
           "(micro-batch {} accumulated {} times, precision {}, recompute {}, offload {}); raise memory.budget to at "
           "least {} or shrink the model",
           format_bytes(budget), format_bytes(smallest.ledger.total()), smallest.batch_size, smallest.grad_accum_steps,
           smallest.recipe, smallest.policy.describe(), smallest.offload, format_bytes(smallest.ledger.total()));
}

}  // namespace gpt
