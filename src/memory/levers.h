// The table of memory levers (`gpt-train plan --levers`): for the configured model and batch, what the four
// components (parameters, gradients, optimizer state, activations) and everything else the ledger counts take
// under each way of saving memory, alone and as the planner combines them, and the compute or traffic each costs.
//
// Each row is a named transform of the config (a Lever), and its numbers come from running the ledger and the
// planner on the transformed config, the code a run itself plans with; so the table cannot disagree with what a
// run of that config would plan. Rows follow the order in which the levers are best pulled (the planner's order):
// precision, then accumulation, then recomputation, then sharding over data-parallel ranks or offloading the
// optimizer to host memory (whose bytes the table shows in a host column beside the device's).
#pragma once

#include "backend/backend.h"
#include "config/config.h"
#include "memory/ledger.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace gpt {

// A run as a lever changes it: the config, and the data-parallel ranks it runs on (which no config key holds:
// mpirun decides them).
struct LeverVariant {
  Config config;
  int ranks = 1;
};

struct Lever {
  std::string family;  // precision, accumulation, recomputation, sharding, offload, fine-tuning, combined, planner
  std::string name;
  // Turns the configured run into this lever's; returns why the lever cannot apply to it (empty when it can).
  std::function<std::string(LeverVariant&)> apply;
};

// What one rank holds under data parallelism, planned as DataParallel and AdamW lay their buffers out: every
// block's gradients one bucket (the embeddings and final LayerNorm one more), padded to 64 elements, or under
// ZeRO-1 to 64 x ranks, so each rank owns an equal chunk of every bucket and keeps AdamW moments for its chunks.
struct DataParallelMemory {
  uint64_t optimizer = 0;      // AdamW m and v of the rank that owns the most elements
  std::vector<uint64_t> rank_optimizer;  // each rank's AdamW m and v (without ZeRO: all equal, the whole model's)
  uint64_t communication = 0;  // bucket, shard and scalar buffers
  double bytes_sent_per_step = 0.0;  // per rank, ring collectives (DataParallel::bytes_sent_per_step)
};
// reduce_dtype: the buckets' format (dist.reduce_dtype). Throws for zero_stage other than 0 or 1 and for
// ranks < 2 (one rank has no data-parallel buffers).
DataParallelMemory data_parallel_memory(const ModelConfig& model, int ranks, int zero_stage, DType reduce_dtype);

// Rank `rank`'s ledger in a data-parallel run of `ranks` (>= 2): ledger_for, with that rank's AdamW state and the
// data-parallel buffers. Under memory.offload: optimizer with ZeRO-1 the host column holds the rank's shard of the
// gradients (the FP32 copy of its reduce-scattered chunks) and of the moments (make_optimizer's host arenas, laid
// out as its AdamW moments are), and of the masters all of them where they live on the host (masters_on_host),
// else AdamW's copy of the shard's; without ZeRO every rank's host holds the whole model's, as on one rank. Under LoRA,
// ledger_for's (every rank holds the same adapters).
MemoryLedger data_parallel_ledger(const Config& config, const RecomputePolicy& policy, int batch_size,
                                  const BackendCapabilities& backend, int ranks, int rank);

// The ledger of a variant: ledger_for on its config, and with ranks > 1 the optimizer state and buffers of
// data_parallel_memory (what the trainer puts into the ledger it logs).
MemoryLedger variant_ledger(const LeverVariant& variant, const BackendCapabilities& backend);

struct LeverRow {
  std::string family, name;
  std::string not_applicable;  // why this lever does not apply to the config; the numbers below are then unset
  LeverVariant variant;
  MemoryLedger ledger;
  StepFlops flops;  // of one micro-batch
  double bytes_sent_per_step = 0.0;
  uint64_t host_traffic_per_step = 0;  // under optimizer offload: the gradients to the host, FP32 weights back

  // The four components and the rest of the ledger (communication buffers, FP8 scaling state, backend
  // workspace, LoRA scratch),
  // which sum to ledger.total(), the device's bytes; ledger.host_total() is what offload keeps on the host.
  uint64_t params() const { return ledger.weights(); }
  uint64_t other() const {
    return ledger.adapter_scratch + ledger.communication + ledger.fp8_state + ledger.backend_workspace;
  }
};

// The rows, as data: the FP32 baseline (the configured model, sequence length and global batch, in fp32 with
// nothing else pulled), each lever alone on it, the levers stacked in the planner's order, and the planner's own
// choice for each memory budget in `budgets`. LoRA appears only when the config fine-tunes with LoRA: it changes
// what is trained, so it is no lever for a run that trains every weight.
std::vector<Lever> standard_levers(const Config& config, const std::vector<uint64_t>& budgets,
                                   const BackendCapabilities& backend);

// The budgets the planner rows try: `budget` when given, else the memory of common GPUs (4 to 80 GiB) below
// what the FP32 baseline takes, down to the first in which the planner finds nothing.
std::vector<uint64_t> planner_budgets(const Config& config, std::optional<uint64_t> budget,
                                      const BackendCapabilities& backend);

LeverRow evaluate_lever(const Lever& lever, const Config& config, const BackendCapabilities& backend);

struct LeverTable {
  Config config;  // as configured
  std::vector<LeverRow> rows;
};
LeverTable lever_table(const Config& config, std::optional<uint64_t> budget, const BackendCapabilities& backend);

}  // namespace gpt
