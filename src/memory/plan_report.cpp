#include "memory/plan_report.h"

#include "memory/planner.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace gpt {

std::string plan_report(const Config& config, std::optional<uint64_t> budget, const BackendCapabilities& backend) {
  const ModelConfig& m = config.model;
  const int B = config.train.batch_size, T = config.train.seq_len;
  const RecomputePolicy configured = resolve_recompute(config.recompute, m.n_layer);
  std::vector<RecomputePolicy> rows = standard_policies(m.n_layer);
  bool listed = false;
  for (const RecomputePolicy& p : rows) listed |= p.describe() == configured.describe();
  if (!listed) rows.push_back(configured);

  std::string out = fmt::format(
      "memory plan: L{} C{} NH{} Vp{}, micro-batch {} x {} (x{} accumulation), precision {}, attention {} scores\n\n",
      m.n_layer, m.n_embd, m.n_head, m.padded_vocab_size(), B, T, config.train.grad_accum_steps,
      config.precision.recipe == "fp32" ? std::string("FP32") : config.precision.recipe,
      backend.attention_keeps_probs ? "materialises" : "does not store");
  if (!backend.attention_keeps_probs)
    out += "attention is fused: each block keeps one log-sum-exp per head and row instead of the probabilities,\n"
           "so selective recomputation of attention saves no memory and reruns nothing (its row equals none's).\n\n";
  // Under memory.offload the rows are device bytes and one more column says what the host holds.
  const bool offload = config.memory.offload != "none";
  out += fmt::format("{:<50} {:>11} {:>11} {:>11} {:>11} {:>11}{} {:>9}{}\n", "recompute", "params", "grads", "optimizer",
                     "activations", "total", offload ? fmt::format(" {:>11}", "host") : "", "extra fwd",
                     budget ? "  fits " + format_bytes(*budget) : "");
  for (const RecomputePolicy& p : rows) {
    const MemoryLedger l = ledger_for(config, p, B, backend);
    const StepFlops f = step_flops(m, B, T, p, backend.attention_keeps_probs, LoraSpec::from_config(config.finetune));
    const bool is_configured = p.describe() == configured.describe();
    out += fmt::format("{:<50} {:>11} {:>11} {:>11} {:>11} {:>11}{} {:>8.1f}%{}\n",
                       (is_configured ? "* " : "  ") + p.describe(),
                       format_bytes(l.weights()),
                       format_bytes(l.gradients), format_bytes(l.optimizer), format_bytes(l.activations()),
                       format_bytes(l.total()), offload ? fmt::format(" {:>11}", format_bytes(l.host_total())) : "",
                       100.0 * f.overhead(),
                       budget ? (l.total() <= *budget ? "  yes" : "  no") : "");
  }
  const MemoryLedger ledger = ledger_for(config, configured, B, backend);
  out += fmt::format("\n* configured ({}): {} in total\n{}", configured.describe(), format_bytes(ledger.total()),
                     ledger.table());
  if (config.finetune.lora()) {
    Config full = config;
    full.finetune.lora_rank = 0;
    const MemoryLedger f = ledger_for(full, configured, B, backend);
    const auto row = [&](const char* what, uint64_t lora, uint64_t whole) {
      out += fmt::format("  {:<40} {:>12} {:>12}\n", what, format_bytes(lora), format_bytes(whole));
    };
    out += fmt::format("\nLoRA (rank {}, alpha {}, targets {}) against full fine-tuning, same micro-batch and recompute:\n"
                       "  {:<40} {:>12} {:>12}\n",
                       config.finetune.lora_rank, config.finetune.lora_alpha, fmt::join(config.finetune.lora_targets, ", "),
                       "", "LoRA", "full");
    row("trained parameters (FP32 masters)", ledger.parameters, f.parameters);
    row("frozen base (compute format)", ledger.frozen_weights, 0);
    row("compute copy of the trained weights", ledger.compute_weights, f.compute_weights);
    row("gradients", ledger.gradients, f.gradients);
    row("optimizer state (AdamW m, v)", ledger.optimizer, f.optimizer);
    row("activations (+ LoRA scratch)", ledger.activations() + ledger.adapter_scratch, f.activations());
    row("total", ledger.total(), f.total());
  }
  if (offload)
    out += "\nmemory.offload: optimizer: the FP32 masters, a host copy of the gradients and the AdamW moments live in\n"
           "host memory (the host column) and AdamW runs on the host; the device keeps the compute copy, the\n"
           "gradients and the activations, and every device column and total leaves the optimizer out. Its FP32\n"
           "weights stay in fp32 (the forward reads them); under bf16/fp16 the host writes the compute copy into\n"
           "a twin of it in host memory, which crosses the bus in the compute format; under fp8 a staging buffer\n"
           "of one block's largest tensor replaces them, through which the host masters are cast into the\n"
           "compute copy with their scales.\n";
  out += "\nextra fwd: forward FLOPs recomputed per step as a share of a plain step (forward + backward),\n"
         "counting matrix products and attention; GELU and LayerNorm recomputation cost no such FLOPs.\n";
  if (ledger.backend_workspace > 0)
    out += fmt::format("total: every row includes the {} of device memory the backend reserves for itself (its\n"
                       "matrix-product workspace and op scratch), the same whatever the plan.\n",
                       format_bytes(ledger.backend_workspace));
  if (config.precision.recipe != "fp32")
    out += fmt::format("precision {}: every tensor is counted at the size of its format (src/precision/precision_layout.h):\n"
                       "activations at 2 bytes (1 for an FP8 block's linear inputs), the compute copy of the weights\n"
                       "beside the FP32 masters (params), gradients in precision.grad_dtype; every backend, the CPU\n"
                       "included, stores them at those sizes.\n",
                       config.precision.recipe);
  return out;
}

}  // namespace gpt
