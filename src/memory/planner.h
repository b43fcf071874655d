// Fitting a run into a memory budget (memory.budget): keep the global batch, and choose in this order:
// a lower precision (bf16 for an fp32 run, on a backend that stores narrow formats at their size); then
// accumulation with the largest micro-batch that fits and no recomputation; then selective
// recomputation; then full recomputation with the smallest segment length k that fits; and only when none of
// these fits, the same order again with the optimizer offloaded to host memory (memory.offload: optimizer), on a
// backend whose device memory is not the host's.
#pragma once

#include "backend/backend.h"
#include "config/config.h"
#include "memory/ledger.h"

#include <string>
#include <vector>

namespace gpt {

struct MemoryChoice {
  int batch_size = 1;
  int grad_accum_steps = 1;
  RecomputePolicy policy;
  std::string recipe;  // precision.recipe: the configured one, or bf16 when lowering it was needed
  std::string offload;  // memory.offload: the configured one, or optimizer when nothing fitted without it
  MemoryLedger ledger;
  std::string reason;
};

// Whether a run keeps its FP32 masters in host memory only (GPT's masters_host): memory.offload: optimizer
// under a recipe with a compute copy (bf16, fp16, fp8), without LoRA. Over several ranks every rank holds all
// of them on its host; the start's broadcast and ZeRO-1's all-gather of the updated weights pass through the
// device's staging buffer and gradient buckets, where the device's communicator (NCCL) reaches them.
bool masters_on_host(const Config& config);

// The ledger of the config with this micro-batch and recompute policy on a backend with these
// capabilities: whether attention keeps its probabilities, and the workspace the backend reserves; for
// one rank (data_parallel_ledger adds what data parallelism changes).
MemoryLedger ledger_for(const Config& config, const RecomputePolicy& policy, int batch_size,
                        const BackendCapabilities& backend);

// Throws gpt::Error naming the smallest budget that would work when nothing fits. The precision is lowered
// only on a backend that stores narrow formats at their size (stores_low_precision); every candidate counts
// the backend's workspace, which no choice shrinks.
MemoryChoice choose_memory_plan(const Config& config, uint64_t budget, const BackendCapabilities& backend);

// The policies the plan table compares: none, selective per op and all, full every 1 and every auto.
std::vector<RecomputePolicy> standard_policies(int n_layer);

}  // namespace gpt
