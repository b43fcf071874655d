#include "memory/plan_report.h"

#include "memory/planner.h"

#include <fmt/format.h>

namespace gpt {

std::string plan_report(const Config& config, std::optional<uint64_t> budget, bool keeps_probs) {
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
      keeps_probs ? "materialises" : "does not store");
  out += fmt::format("{:<50} {:>11} {:>11} {:>11} {:>11} {:>11} {:>9}{}\n", "recompute", "params", "grads", "optimizer",
                     "activations", "total", "extra fwd", budget ? "  fits " + format_bytes(*budget) : "");
  for (const RecomputePolicy& p : rows) {
    const MemoryLedger l = ledger_for(config, p, B, keeps_probs);
    const StepFlops f = step_flops(m, B, T, p);
    const bool is_configured = p.describe() == configured.describe();
    out += fmt::format("{:<50} {:>11} {:>11} {:>11} {:>11} {:>11} {:>8.1f}%{}\n",
                       (is_configured ? "* " : "  ") + p.describe(), format_bytes(l.parameters + l.compute_weights),
                       format_bytes(l.gradients), format_bytes(l.optimizer), format_bytes(l.activations()),
                       format_bytes(l.total()), 100.0 * f.overhead(),
                       budget ? (l.total() <= *budget ? "  yes" : "  no") : "");
  }
  const MemoryLedger ledger = ledger_for(config, configured, B, keeps_probs);
  out += fmt::format("\n* configured ({}): {} in total\n{}", configured.describe(), format_bytes(ledger.total()),
                     ledger.table());
  out += "\nextra fwd: forward FLOPs recomputed per step as a share of a plain step (forward + backward),\n"
         "counting matrix products and attention; GELU and LayerNorm recomputation cost no such FLOPs.\n";
  if (config.precision.recipe != "fp32")
    out += fmt::format("precision {}: activations and the compute copy of the weights are counted at 2 bytes, as the\n"
                       "GPU holds them (params: FP32 masters plus that copy); the CPU backend emulates the rounding in\n"
                       "FP32 storage, so on the CPU they take the FP32 sizes.\n",
                       config.precision.recipe);
  return out;
}

}  // namespace gpt
