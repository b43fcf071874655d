#include "memory/ledger.h"

#include "layout/lora_layout.h"
#include "layout/parameter_layout.h"

#include <fmt/format.h>

namespace gpt {

uint64_t MemoryLedger::activations() const {
  uint64_t total = 0;
  for (uint64_t bytes : activation) total += bytes;
  return total;
}

std::string MemoryLedger::table() const {
  const bool host = host_total() > 0;
  std::string s;
  if (host) s += fmt::format("  {:<42} {:>12} {:>12}\n", "", "device", "host");
  auto row = [&](const std::string& name, uint64_t bytes, uint64_t host_bytes = 0) {
    s += host ? fmt::format("  {:<42} {:>12} {:>12}\n", name, format_bytes(bytes), format_bytes(host_bytes))
              : fmt::format("  {:<42} {:>12}\n", name, format_bytes(bytes));
  };
  row(frozen_weights > 0 ? "parameters: LoRA adapters (FP32)" : host ? "parameters (FP32; host: the masters)" : "parameters",
      parameters, host_parameters);
  if (frozen_weights > 0) row("parameters: frozen base (compute format)", frozen_weights);
  if (master_staging > 0) row("parameters: FP32 staging (masters on the host)", master_staging);
  if (compute_weights > 0) row("parameters: compute copy (16/8-bit)", compute_weights, host_compute_weights);
  row("gradients", gradients, host_gradients);
  row("optimizer state (AdamW m, v)", optimizer, host_optimizer);
  for (int u = 0; u < kActivationUses; ++u) row(std::string("activations: ") + activation_use_name(static_cast<ActivationUse>(u)), activation[u]);
  if (adapter_scratch > 0) row("LoRA products scratch", adapter_scratch);
  row("communication buffers", communication);
  if (fp8_state > 0) row("FP8 scaling state", fp8_state);
  row("backend workspace", backend_workspace);
  row("total", total(), host_total());
  return s;
}

MemoryLedger memory_ledger(const ModelConfig& model, const ActivationPlan& plan, DType dtype) {
  MemoryLedger ledger;
  ledger.parameters = ParameterLayout(model, dtype).arena_layout().total_bytes();
  ledger.gradients = ledger.parameters;
  ledger.optimizer = 2 * ledger.parameters;
  for (int u = 0; u < kActivationUses; ++u) ledger.activation[u] = plan.bytes(static_cast<ActivationUse>(u));
  return ledger;
}

StepFlops step_flops(const ModelConfig& m, int batch_size, int seq_len, const RecomputePolicy& policy,
                     bool attention_keeps_probs, const LoraSpec& lora) {
  const double BT = static_cast<double>(batch_size) * seq_len, T = seq_len, C = m.n_embd;
  // A block's adapters (model/lora.cpp): forward x A^T and h B^T; backward h again, dB, dh, dA and dx.
  double adapters_forward = 0.0, adapters_backward = 0.0;
  for (LoraTarget t : kAllLoraTargets) {
    if (!lora.enabled() || !lora.has(t)) continue;
    const auto [out, in] = lora_weight_shape(t, m);
    adapters_forward += 2.0 * BT * lora.rank * static_cast<double>(in + out);
    adapters_backward += 2.0 * BT * lora.rank * static_cast<double>(3 * in + 2 * out);
  }
  const double weights = 2.0 * BT * (3 * C * C + C * C + 4 * C * C + 4 * C * C);
  const double block_matmul = weights + adapters_forward;
  const double block_attention = 4.0 * BT * T * C;
  const double head = 2.0 * BT * C * m.padded_vocab_size();
  StepFlops f;
  f.forward = m.n_layer * (block_matmul + block_attention) + head;
  f.backward = 2.0 * f.forward;
  // Frozen weights: only their input gradients (as many FLOPs as their forward), no weight gradients.
  if (lora.enabled()) f.backward = m.n_layer * (weights + adapters_backward + 2.0 * block_attention) + head;
  for (int l = 0; l < m.n_layer; ++l) {
    // A full segment of n blocks reruns n blocks to rebuild its outputs and n-1 again for internals.
    if (policy.full(l)) f.recompute += (l + 1 == policy.segment_end(l) ? 1 : 2) * (block_matmul + block_attention);
    else if (policy.selective(l) && policy.attention && attention_keeps_probs) f.recompute += block_attention;
  }
  return f;
}

double block_activation_bytes(const ActivationFormula& f, double s, double b, double h, double a) {
  const double sbh = s * b * h, as2b = a * s * s * b;
  // Stored by the plan in mode none: block input (the previous output), ln1, qkv, atty, probs,
  // residual2, ln2, fch, fch_gelu; and the two LayerNorms' mean and rstd.
  double bytes = f.elem_bytes * (sbh * (1 + 1 + 3 + 1 + 1 + 1 + 4 + 4) + as2b) + f.stat_bytes * 4 * s * b;
  // Dropout masks: attention probabilities, and the attention and MLP residual branches.
  bytes += f.mask_bytes * (as2b + 2 * sbh);
  if (f.store_dropout_output) bytes += f.elem_bytes * as2b;
  return bytes;
}

}  // namespace gpt
