#include "memory/levers.h"

#include "core/arena.h"
#include "core/error.h"
#include "layout/parameter_layout.h"
#include "memory/planner.h"
#include "memory/recompute.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

namespace gpt {
namespace {

// DataParallel's bucket granule (64 elements, the arenas' 256-byte alignment in f32) and its buffer of host
// scalars; tests/memory/test_levers.cpp checks data_parallel_memory against a DataParallel built for each rank.
constexpr int64_t kGranule = 64;
constexpr int64_t kScalars = 64;

int64_t round_up(int64_t n, int64_t multiple) { return (n + multiple - 1) / multiple * multiple; }

// Sequences per optimizer step on one rank: train.global_batch_tokens, when set, decides the accumulation.
int global_sequences(const TrainConfig& t) {
  if (t.global_batch_tokens > 0) return static_cast<int>(t.global_batch_tokens / t.seq_len);
  return t.batch_size * t.grad_accum_steps;
}

// The configured run with its accumulation spelled out, and no budget (a row says what it changes itself).
void as_configured(LeverVariant& v) {
  TrainConfig& t = v.config.train;
  t.grad_accum_steps = global_sequences(t) / t.batch_size;
  t.global_batch_tokens = 0;
  v.config.memory.budget.clear();
  v.ranks = 1;
}

// The configured model, sequence length, micro-batch and global batch, trained in FP32 on one rank with every
// weight trained and every activation kept: what each lever is measured against.
void to_baseline(LeverVariant& v) {
  as_configured(v);
  Config& c = v.config;
  c.precision.recipe = "fp32";
  c.precision.grad_dtype = "fp32";
  c.recompute = RecomputeConfig{};
  c.finetune.lora_rank = 0;
  c.dist.zero = 0;
  c.dist.reduce_dtype = "fp32";
  c.memory.offload = "none";
}

void narrow_gradients(LeverVariant& v) {
  v.config.precision.recipe = "bf16";
  v.config.precision.grad_dtype = "bf16";
}

std::string accumulate(LeverVariant& v, int steps) {
  TrainConfig& t = v.config.train;
  const int sequences = t.batch_size * t.grad_accum_steps;
  if (sequences % steps != 0)
    return fmt::format("the global batch of {} sequences does not split into {} equal micro-batches", sequences, steps);
  t.batch_size = sequences / steps;
  t.grad_accum_steps = steps;
  return "";
}

void recompute(LeverVariant& v, const RecomputePolicy& policy) {
  v.config.recompute = recompute_config(policy, v.config.model.n_layer);
}

// Applied to the baseline, which trains every weight: variant_ledger plans no data parallelism of LoRA adapters.
void shard(LeverVariant& v, int ranks, int zero_stage) {
  v.config.dist.zero = zero_stage;
  v.ranks = ranks;
}

// On one rank: the data-parallel buffers and ZeRO-1's shards are planned by variant_ledger for device-held
// optimizer state only, so offload is not stacked on several ranks here.
std::string offload_optimizer(LeverVariant& v, const BackendCapabilities& backend) {
  if (backend.device_memory_is_host)
    return "optimizer offload moves nothing on this backend: its device memory is the host's (plan with "
           "train.backend: cuda to see it)";
  if (v.ranks > 1) return "the lever table plans optimizer offload on one rank only";
  v.config.memory.offload = "optimizer";
  return "";
}

DType reduce_dtype(const Config& c) { return c.dist.reduce_dtype == "bf16" ? DType::BF16 : DType::F32; }

// A policy's name without "(N blocks)" when it covers every block, as every row of the table does.
std::string policy_name(const RecomputePolicy& p, int n_layer) {
  const std::string full = p.describe();
  return p.layers == n_layer ? full.substr(0, full.rfind(" (")) : full;
}

RecomputePolicy full_every_auto(int n_layer) {
  RecomputePolicy p;
  p.mode = RecomputeMode::Full;
  p.every = auto_recompute_every(n_layer);
  p.layers = n_layer;
  return p;
}

// The planner's message without the " (file:line)" every gpt::Error ends with: a table note, not a crash report.
std::string without_location(const std::string& message) {
  const size_t open = message.rfind(" (");
  return open != std::string::npos && message.back() == ')' && message.find(':', open) != std::string::npos
             ? message.substr(0, open)
             : message;
}

}  // namespace

DataParallelMemory data_parallel_memory(const ModelConfig& model, int ranks, int zero_stage, DType reduce_dtype) {
  GPT_CHECK(ranks >= 2, "data_parallel_memory: {} rank(s); one rank holds no data-parallel buffers", ranks);
  GPT_CHECK(zero_stage == 0 || zero_stage == 1, "dist.zero: stage {} does not exist here; use 0 or 1", zero_stage);
  const ParameterLayout layout(model, DType::F32);
  const int L = model.n_layer;
  struct Segment {
    size_t tensor;
    int64_t count, packed;  // elements, and their offset in the bucket
  };
  struct Bucket {
    std::vector<Segment> segments;
    int64_t count = 0, padded = 0;
  };
  std::vector<Bucket> buckets(static_cast<size_t>(L) + 1);
  for (size_t i = 0; i < layout.specs().size(); ++i) {
    const ArenaBuffer& buffer = layout.arena_layout().buffer(i);
    const auto numel = static_cast<int64_t>(buffer.bytes / dtype_size(buffer.dtype));
    const auto add = [&](Bucket& b, int64_t count) {
      b.segments.push_back({i, count, b.count});
      b.count += count;
    };
    if (outside_blocks(layout.specs()[i].name)) {
      add(buckets[static_cast<size_t>(L)], numel);
    } else {
      for (int l = 0; l < L; ++l) add(buckets[static_cast<size_t>(l)], numel / L);
    }
  }
  DataParallelMemory out;
  int64_t elements = 0, shard = 0;
  for (Bucket& b : buckets) {
    b.padded = round_up(b.count, zero_stage == 1 ? kGranule * ranks : kGranule);
    elements += b.padded;
    if (zero_stage == 1) shard += b.padded / ranks;
    out.bytes_sent_per_step += 2.0 * (ranks - 1.0) / ranks *
                               static_cast<double>((zero_stage == 1 ? b.padded : b.count) * dtype_size(reduce_dtype));
  }
  ArenaLayout buffers("data_parallel");
  buffers.add("buckets", {elements}, reduce_dtype);
  if (zero_stage == 1) buffers.add("shard", {shard}, reduce_dtype);
  buffers.add("scalars", {kScalars}, DType::F64);
  out.communication = buffers.total_bytes();

  if (zero_stage == 0) {
    out.optimizer = 2 * layout.arena_layout().total_bytes();
    out.rank_optimizer.assign(static_cast<size_t>(ranks), out.optimizer);
    return out;
  }
  // Rank r's AdamW moments: one buffer per piece of its chunk of each bucket, split at the tensors' boundaries.
  for (int r = 0; r < ranks; ++r) {
    ArenaLayout moments("adamw_m");
    for (const Bucket& b : buckets) {
      const int64_t chunk = b.padded / ranks, lo = r * chunk, hi = lo + chunk;
      for (const Segment& s : b.segments) {
        const int64_t begin = std::max(lo, s.packed), end = std::min(hi, s.packed + s.count);
        if (begin < end) moments.add(layout.arena_layout().buffer(s.tensor).name, {end - begin}, DType::F32);
      }
    }
    out.rank_optimizer.push_back(2 * moments.total_bytes());
    out.optimizer = std::max(out.optimizer, out.rank_optimizer.back());
  }
  return out;
}

MemoryLedger data_parallel_ledger(const Config& config, const RecomputePolicy& policy, int batch_size,
                                  const BackendCapabilities& backend, int ranks, int rank) {
  GPT_CHECK(rank >= 0 && rank < ranks, "data_parallel_ledger: rank {} of {}", rank, ranks);
  MemoryLedger ledger = ledger_for(config, policy, batch_size, backend);
  // Every rank holds the same LoRA adapters and their state (ZeRO-1 refuses LoRA); their buckets, a few rank-wide
  // matrices, are left out.
  if (config.finetune.lora()) return ledger;
  const DataParallelMemory dp = data_parallel_memory(config.model, ranks, config.dist.zero, reduce_dtype(config));
  ledger.communication = dp.communication;
  const uint64_t moments = dp.rank_optimizer[static_cast<size_t>(rank)];
  if (config.memory.offload != "optimizer") {
    ledger.optimizer = moments;
  } else if (config.dist.zero == 1) {
    // The shard's moments and the FP32 copy of its reduce-scattered gradients; the masters are the model's
    // own on the host, all of them (ledger_for's), or AdamW's host copy of the shard's.
    ledger.host_optimizer = moments;
    ledger.host_gradients = moments / 2;
    if (!masters_on_host(config)) ledger.host_parameters = moments / 2;
  }
  return ledger;
}

MemoryLedger variant_ledger(const LeverVariant& v, const BackendCapabilities& backend) {
  const Config& c = v.config;
  MemoryLedger ledger =
      ledger_for(c, resolve_recompute(c.recompute, c.model.n_layer), c.train.batch_size, backend);
  if (v.ranks > 1) {
    GPT_CHECK(!c.finetune.lora(), "the lever table plans data parallelism of full training only, not of LoRA adapters");
    const DataParallelMemory dp =
        data_parallel_memory(c.model, v.ranks, c.dist.zero, reduce_dtype(c));
    ledger.optimizer = dp.optimizer;
    ledger.communication = dp.communication;
  }
  return ledger;
}

std::vector<uint64_t> planner_budgets(const Config& config, std::optional<uint64_t> budget,
                                      const BackendCapabilities& backend) {
  if (budget) return {*budget};
  LeverVariant baseline{config, 1}, configured{config, 1};
  to_baseline(baseline);
  as_configured(configured);
  const uint64_t most = variant_ledger(baseline, backend).total();
  std::vector<uint64_t> out;
  for (const uint64_t gib : {80, 40, 24, 16, 12, 8, 6, 4}) {
    if (gib << 30 >= most) continue;
    out.push_back(gib << 30);
    // The planner tries the same candidates whatever the budget: once one fails, every smaller one fails too.
    try {
      choose_memory_plan(configured.config, gib << 30, backend);
    } catch (const Error&) {
      break;
    }
  }
  return out;
}

std::vector<Lever> standard_levers(const Config& config, const std::vector<uint64_t>& budgets,
                                   const BackendCapabilities& backend) {
  using Change = std::function<std::string(LeverVariant&)>;
  // A change that applies to every config.
  const auto always = [](std::function<void(LeverVariant&)> f) -> Change {
    return [f = std::move(f)](LeverVariant& v) {
      f(v);
      return std::string();
    };
  };
  // A lever alone: the change applied to the FP32 baseline.
  const auto lever = [](std::string family, std::string name, Change change) {
    return Lever{std::move(family), std::move(name), [change = std::move(change)](LeverVariant& v) {
                   to_baseline(v);
                   return change(v);
                 }};
  };
  const int L = config.model.n_layer;
  std::vector<Lever> out;
  out.push_back({"configured", "configured", always(as_configured)});
  out.push_back(lever("baseline", "FP32 baseline", always([](LeverVariant&) {})));
  for (const char* recipe : {"bf16", "fp8"})
    out.push_back(lever("precision", recipe, always([recipe](LeverVariant& v) { v.config.precision.recipe = recipe; })));
  out.push_back(lever("precision", "bf16, grad_dtype bf16", always(narrow_gradients)));
  for (const int steps : {2, 4, 8})
    out.push_back(lever("accumulation", fmt::format("accumulation x{}", steps),
                        [steps](LeverVariant& v) { return accumulate(v, steps); }));
  for (const RecomputePolicy& policy : standard_policies(L))
    if (policy.mode != RecomputeMode::None)
      out.push_back(lever("recomputation", policy_name(policy, L),
                          always([policy](LeverVariant& v) { recompute(v, policy); })));
  // Data parallelism's own buffers, which ZeRO-1 needs as well: what the sharding rows save is against this.
  out.push_back(lever("sharding", "data parallel on 8 ranks, no ZeRO", always([](LeverVariant& v) { shard(v, 8, 0); })));
  for (const int ranks : {2, 4, 8})
    out.push_back(lever("sharding", fmt::format("ZeRO-1 on {} ranks", ranks),
                        always([ranks](LeverVariant& v) { shard(v, ranks, 1); })));
  out.push_back(lever("offload", "optimizer offload",
                      [backend](LeverVariant& v) { return offload_optimizer(v, backend); }));
  if (config.finetune.lora()) {
    const FinetuneConfig lora = config.finetune;
    const std::string targets = lora.lora_targets.size() == FinetuneConfig{}.lora_targets.size()
                                    ? std::string("every linear layer")
                                    : fmt::format("{}", fmt::join(lora.lora_targets, ","));
    out.push_back(lever("fine-tuning", fmt::format("LoRA rank {}, {}", lora.lora_rank, targets),
                        always([lora](LeverVariant& v) { v.config.finetune = lora; })));
  }

  // Stacked in the planner's order on bf16 with bf16 gradients (the precision rows' last), each row adding one
  // lever to the row above: how far the levers together go. Accumulation to micro-batch 1 and full
  // recomputation every sqrt(L) blocks are each lever at its most.
  const std::vector<std::pair<std::string, Change>> stack = {
      {"", always(narrow_gradients)},
      {"+ accumulation to micro-batch 1",
       [](LeverVariant& v) { return accumulate(v, v.config.train.batch_size * v.config.train.grad_accum_steps); }},
      {"+ " + policy_name(full_every_auto(L), L), always([L](LeverVariant& v) { recompute(v, full_every_auto(L)); })},
      {"+ optimizer offload", [backend](LeverVariant& v) { return offload_optimizer(v, backend); }}};
  for (size_t n = 2; n <= stack.size(); ++n)
    out.push_back(lever("combined", stack[n - 1].first, [stack, n](LeverVariant& v) {
      for (size_t i = 0; i < n; ++i)
        if (std::string why = stack[i].second(v); !why.empty()) return why;
      return std::string();
    }));

  for (const uint64_t budget : budgets)
    out.push_back({"planner", fmt::format("memory.budget {}", format_bytes(budget)), [budget, backend](LeverVariant& v) {
                     as_configured(v);
                     try {
                       const MemoryChoice choice = choose_memory_plan(v.config, budget, backend);
                       v.config.train.batch_size = choice.batch_size;
                       v.config.train.grad_accum_steps = choice.grad_accum_steps;
                       v.config.precision.recipe = choice.recipe;
                       v.config.recompute = recompute_config(choice.policy, v.config.model.n_layer);
                       v.config.memory.offload = choice.offload;
                       return std::string();
                     } catch (const Error& e) {
                       return without_location(e.what());
                     }
                   }});
  return out;
}

LeverRow evaluate_lever(const Lever& lever, const Config& config, const BackendCapabilities& backend) {
  LeverRow row;
  row.family = lever.family;
  row.name = lever.name;
  row.variant = LeverVariant{config, 1};
  row.not_applicable = lever.apply(row.variant);
  if (!row.not_applicable.empty()) return row;
  const Config& c = row.variant.config;
  row.ledger = variant_ledger(row.variant, backend);
  row.flops = step_flops(c.model, c.train.batch_size, c.train.seq_len, resolve_recompute(c.recompute, c.model.n_layer),
                         backend.attention_keeps_probs, LoraSpec::from_config(c.finetune));
  // Offload moves each step's gradients to the host and the updated weights back: the compute copy in its
  // format from its host twin, or the FP32 weights (into the device's masters, or under fp8 through the
  // staging buffer into the compute copy).
  if (c.memory.offload == "optimizer")
    row.host_traffic_per_step = row.ledger.gradients + (row.ledger.host_compute_weights > 0
                                                            ? row.ledger.host_compute_weights
                                                            : row.ledger.host_parameters);
  if (row.variant.ranks > 1)
    row.bytes_sent_per_step =
        data_parallel_memory(c.model, row.variant.ranks, c.dist.zero, reduce_dtype(c)).bytes_sent_per_step;
  return row;
}

LeverTable lever_table(const Config& config, std::optional<uint64_t> budget, const BackendCapabilities& backend) {
  LeverTable table{config, {}};
  for (const Lever& lever : standard_levers(config, planner_budgets(config, budget, backend), backend))
    table.rows.push_back(evaluate_lever(lever, config, backend));
  return table;
}

}  // namespace gpt
