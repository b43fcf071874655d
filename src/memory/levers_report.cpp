#include "memory/levers_report.h"

#include "core/error.h"
#include "memory/recompute.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

namespace gpt {
namespace {

// The line above each family's rows; the configured run and the baseline have none.
const std::map<std::string, std::string>& family_headers() {
  static const std::map<std::string, std::string> kHeaders = {
      {"precision", "precision (the FP32 masters and AdamW state stay FP32)"},
      {"accumulation", "accumulation (the same global batch in smaller micro-batches)"},
      {"recomputation", "recomputation (every block)"},
      {"sharding", "sharding over data-parallel ranks (per rank, the micro-batch unchanged)"},
      {"offload", "offload (the FP32 masters, a host copy of the gradients and AdamW state in host memory)"},
      {"fine-tuning", "fine-tuning (the configured adapters; the base frozen in the compute format)"},
      {"combined", "combined: bf16 with bf16 gradients, each row adding one lever to the row above"},
      {"planner", "planner (memory.budget keeps the global batch; precision, accumulation, recompute, offload)"},
  };
  return kHeaders;
}

std::string describe_run(const LeverVariant& v) {
  const Config& c = v.config;
  return fmt::format("{}{}, micro-batch {} x {} accumulated, recompute {}{}{}", c.precision.recipe,
                     c.precision.grad_dtype == "fp32" ? "" : " (" + c.precision.grad_dtype + " gradients)",
                     c.train.batch_size, c.train.grad_accum_steps,
                     resolve_recompute(c.recompute, c.model.n_layer).describe(),
                     v.ranks > 1 ? fmt::format(", {} ranks, ZeRO-{}", v.ranks, c.dist.zero) : "",
                     c.memory.offload == "none" ? "" : ", offload " + c.memory.offload);
}

const LeverRow& baseline_row(const LeverTable& table) {
  const auto found =
      std::find_if(table.rows.begin(), table.rows.end(), [](const LeverRow& r) { return r.family == "baseline"; });
  GPT_CHECK(found != table.rows.end(), "the lever table has no FP32 baseline row");
  return *found;
}

uint64_t bytes_sent(const LeverRow& row) { return static_cast<uint64_t>(std::llround(row.bytes_sent_per_step)); }

}  // namespace

std::string lever_report(const LeverTable& table, const BackendCapabilities& backend) {
  const Config& config = table.config;
  const ModelConfig& m = config.model;
  const LeverRow& baseline = baseline_row(table);
  std::string out = fmt::format(
      "memory levers: L{} C{} NH{} Vp{}, sequence {}, global batch {} sequences (micro-batch {} x {} accumulated), "
      "attention {} scores; bytes per rank\n\n",
      m.n_layer, m.n_embd, m.n_head, m.padded_vocab_size(), config.train.seq_len,
      baseline.variant.config.train.batch_size * baseline.variant.config.train.grad_accum_steps,
      baseline.variant.config.train.batch_size, baseline.variant.config.train.grad_accum_steps,
      backend.attention_keeps_probs ? "materialises" : "does not store");
  out += fmt::format("  {:<38} {:>10} {:>10} {:>10} {:>11} {:>10} {:>10} {:>10} {:>9} {:>10} {:>10}\n", "lever", "params",
                     "grads", "optimizer", "activations", "other", "total", "host", "extra fwd", "sent/step",
                     "host/step");
  std::vector<std::string> notes;
  std::string family;
  for (const LeverRow& row : table.rows) {
    if (row.family != family) {
      family = row.family;
      if (const auto header = family_headers().find(family); header != family_headers().end())
        out += header->second + "\n";
    }
    const std::string name = (row.family == "configured" ? "* " : "  ") + row.name;
    if (!row.not_applicable.empty()) {
      notes.push_back(row.not_applicable);
      out += fmt::format("{:<40} n/a [{}]\n", name, notes.size());
      continue;
    }
    const MemoryLedger& l = row.ledger;
    out += fmt::format("{:<40} {:>10} {:>10} {:>10} {:>11} {:>10} {:>10} {:>10} {:>8.1f}% {:>10} {:>10}\n", name,
                       format_bytes(row.params()), format_bytes(l.gradients), format_bytes(l.optimizer),
                       format_bytes(l.activations()), format_bytes(row.other()), format_bytes(l.total()),
                       l.host_total() > 0 ? format_bytes(l.host_total()) : "-", 100.0 * row.flops.overhead(),
                       row.variant.ranks > 1 ? format_bytes(bytes_sent(row)) : "-",
                       row.host_traffic_per_step > 0 ? format_bytes(row.host_traffic_per_step) : "-");
    if (row.family == "configured" || row.family == "planner") out += "      = " + describe_run(row.variant) + "\n";
  }
  for (size_t i = 0; i < notes.size(); ++i) out += fmt::format("\n[{}] {}", i + 1, notes[i]);
  if (!notes.empty()) out += "\n";
  out += "\nparams: the FP32 masters, the compute copy of the weights (16/8-bit recipes) and a LoRA run's frozen\n"
         "base. Under offload with a 16/8-bit recipe the masters are in host memory only and params holds the\n"
         "compute copy (under fp8 also an FP32 staging buffer of one block's largest tensor that they are cast\n"
         "from); in fp32 the forward reads the masters, which stay on the device.\n"
         "other: communication buffers, the FP8 scaling state, the backend's own workspace and LoRA scratch; the\n"
         "columns sum to total, the ledger's total for that row's config (gpt-train plan --set ... shows its\n"
         "lines); every column before host is device memory. host: what optimizer offload keeps in host memory\n"
         "(FP32 masters, in bf16/fp16 the compute copy's twin, the gradients' host copy, AdamW moments);\n"
         "host/step: the gradients copied to the host and the weights written back each optimizer step (the\n"
         "compute copy in its format from the twin; the FP32 weights in fp32 and fp8).\n"
         "extra fwd: forward FLOPs recomputed per step as a share of a plain step (forward + backward). Accumulation\n"
         "costs none, but smaller micro-batches keep the matrix products less busy: measure with gpt-train bench.\n"
         "sent/step: bytes each rank sends per optimizer step (ring algorithms): the gradients' all-reduce, or under\n"
         "ZeRO-1 their reduce-scatter and the weights' all-gather. ZeRO-1 shows the rank with the most AdamW state,\n"
         "each gradient bucket padded to 64 x ranks elements. The sharding rows' global batch is ranks times\n"
         "larger unless train.grad_accum_steps shrinks with them; their other column is mostly the gradient\n"
         "buckets, an FP32 copy of the gradients that data parallelism sums in.\n";
  if (!backend.attention_keeps_probs)
    out += "attention is fused: each block keeps one log-sum-exp per head and row instead of the probabilities, so\n"
           "selective recomputation of attention saves no memory and reruns nothing (its row equals the baseline's).\n";
  return out;
}

nlohmann::ordered_json lever_report_json(const LeverTable& table, const BackendCapabilities& backend) {
  const Config& config = table.config;
  const ModelConfig& m = config.model;
  nlohmann::ordered_json out;
  out["model"] = {{"n_layer", m.n_layer}, {"n_embd", m.n_embd}, {"n_head", m.n_head},
                  {"padded_vocab_size", m.padded_vocab_size()}};
  out["seq_len"] = config.train.seq_len;
  const TrainConfig& global = baseline_row(table).variant.config.train;
  out["global_batch_sequences"] = global.batch_size * global.grad_accum_steps;
  out["attention_keeps_probs"] = backend.attention_keeps_probs;
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (const LeverRow& row : table.rows) {
    nlohmann::ordered_json r = {{"family", row.family}, {"name", row.name}, {"applies", row.not_applicable.empty()}};
    if (!row.not_applicable.empty()) {
      r["not_applicable"] = row.not_applicable;
      rows.push_back(r);
      continue;
    }
    const Config& c = row.variant.config;
    r["run"] = {{"recipe", c.precision.recipe},
                {"grad_dtype", c.precision.grad_dtype},
                {"batch_size", c.train.batch_size},
                {"grad_accum_steps", c.train.grad_accum_steps},
                {"recompute", resolve_recompute(c.recompute, m.n_layer).describe()},
                {"ranks", row.variant.ranks},
                {"zero", row.variant.ranks > 1 ? c.dist.zero : 0},
                {"lora_rank", c.finetune.lora_rank},
                {"offload", c.memory.offload}};
    const MemoryLedger& l = row.ledger;
    r["bytes"] = {{"params", row.params()}, {"gradients", l.gradients}, {"optimizer", l.optimizer},
                  {"activations", l.activations()}, {"other", row.other()}, {"total", l.total()}};
    nlohmann::ordered_json ledger = {{"parameters", l.parameters},
                                     {"master_staging", l.master_staging},
                                     {"frozen_weights", l.frozen_weights},
                                     {"compute_weights", l.compute_weights},
                                     {"gradients", l.gradients},
                                     {"optimizer", l.optimizer}};
    for (int u = 0; u < kActivationUses; ++u)
      ledger["activations"][activation_use_name(static_cast<ActivationUse>(u))] = l.activation[u];
    ledger["adapter_scratch"] = l.adapter_scratch;
    ledger["communication"] = l.communication;
    ledger["fp8_state"] = l.fp8_state;
    ledger["backend_workspace"] = l.backend_workspace;
    r["flops"] = {{"forward", row.flops.forward},
                  {"recompute", row.flops.recompute},
                  {"backward", row.flops.backward},
                  {"recompute_share", row.flops.overhead()}};
    ledger["host_parameters"] = l.host_parameters;
    ledger["host_gradients"] = l.host_gradients;
    ledger["host_optimizer"] = l.host_optimizer;
    ledger["host_compute_weights"] = l.host_compute_weights;
    r["ledger"] = ledger;
    r["bytes"]["host"] = l.host_total();
    r["bytes_sent_per_step"] = bytes_sent(row);
    r["host_traffic_per_step"] = row.host_traffic_per_step;
    rows.push_back(r);
  }
  out["rows"] = rows;
  return out;
}

}  // namespace gpt
