// The memory ledger: every byte a run will hold, by component, computed from the config before
// anything is allocated. Parameters, gradients and AdamW moments come from the parameter layout;
// activations from the activation plan, which is also the activation arena's layout; the backend's own
// workspace from what the backend says it reserved (BackendCapabilities::reserved_device_bytes).
#pragma once

#include "config/config.h"
#include "layout/lora_layout.h"
#include "memory/activation_plan.h"
#include "memory/recompute.h"

#include <cstdint>
#include <string>

namespace gpt {

struct MemoryLedger {
  uint64_t parameters = 0;  // the trained masters (FP32): every weight, or under LoRA the adapters
  // Under LoRA (finetune.lora.rank > 0): the frozen base weights in the compute format, and the scratch of the
  // adapters' products (their rank-wide intermediates, the dropped input, the frozen LayerNorms' gradient sinks).
  uint64_t frozen_weights = 0;
  uint64_t adapter_scratch = 0;
  uint64_t compute_weights = 0;  // BF16/F16 copy of the FP32 masters for the matrix products (mixed precision)
  // With the FP32 masters in host memory only (masters_on_host in planner.h; then `parameters` is 0) under
  // fp8 on a GPU: the device's staging buffer the compute copy is cast from, a block's slice of the largest
  // tensor (host_masters_path in layout/parameter_layout.h).
  uint64_t master_staging = 0;
  uint64_t gradients = 0;
  uint64_t optimizer = 0;  // AdamW m and v
  uint64_t activation[kActivationUses] = {};
  uint64_t communication = 0;  // gradient buckets of data parallelism
  // The fp8 recipe's scaling state on the device: scale, inverse, amax and counts per scaled tensor
  // (fp8_state_layout in precision/fp8_state.h).
  uint64_t fp8_state = 0;
  // Held by the backend itself outside the arenas from its construction on: a GPU's matrix-product
  // workspace and op scratch (0 on the CPU).
  uint64_t backend_workspace = 0;
  // The host column: bytes a component keeps in host memory beside (or instead of) the device bytes above.
  // Non-zero under memory.offload: optimizer, where the FP32 masters (host_parameters), the gradients' host
  // copy AdamW reads (host_gradients, in precision.grad_dtype) and the AdamW moments (host_optimizer, while
  // the device's `optimizer` is 0) live in host memory. On a backend whose device memory is the host's
  // (the CPU) both columns are the same RAM and a check of the machine adds them. Under data parallelism a
  // ledger is one rank's (data_parallel_ledger): with ZeRO-1 its host column is that rank's shard, and the
  // check adds the ledgers of the ranks that share a node.
  uint64_t host_parameters = 0;
  uint64_t host_gradients = 0;
  uint64_t host_optimizer = 0;
  // With the FP32 masters in host memory in bf16/fp16 on a GPU: the compute copy's host twin, which the
  // host writes and which crosses the bus in the compute format.
  uint64_t host_compute_weights = 0;
  uint64_t activations() const;
  // Device bytes of the weights: the FP32 masters (or their staging buffer), a LoRA run's frozen base and
  // the compute copy.
  uint64_t weights() const { return parameters + master_staging + frozen_weights + compute_weights; }
  // Device bytes: what a device budget (memory.budget) and the arenas on the device hold.
  uint64_t total() const {
    return weights() + gradients + optimizer + activations() + adapter_scratch + communication + fp8_state +
           backend_workspace;
  }
  uint64_t host_total() const { return host_parameters + host_compute_weights + host_gradients + host_optimizer; }
  // One line per component: its device bytes, and its host bytes when any component has some.
  std::string table() const;
};

MemoryLedger memory_ledger(const ModelConfig& model, const ActivationPlan& plan, DType dtype);

// Matrix-product and attention FLOPs of one micro-batch (the convention of GPT's FlopCounts).
struct StepFlops {
  double forward = 0.0;
  double recompute = 0.0;
  double backward = 0.0;
  // Extra forward work as a fraction of a plain step (forward + backward without recomputation).
  double overhead() const { return recompute / (forward + backward); }
};
// attention_keeps_probs false (a fused attention): selective recomputation of attention reruns nothing.
// Under LoRA (lora.enabled()) the frozen weights' products have no weight gradient (backward is the input
// gradient alone) and each block adds its adapters' products, forward and backward, as the model issues
// them (its backward recomputes each adapter's x A^T; bench/flops.h's model FLOPs leave that out).
StepFlops step_flops(const ModelConfig& model, int batch_size, int seq_len, const RecomputePolicy& policy,
                     bool attention_keeps_probs = true, const LoraSpec& lora = {});

// The per-block activation formula of the ledger with 16-bit activations (e = 2) and the assumptions
// of Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large Transformer Models"):
// dropout masks stored at 1 byte each and the attention dropout output stored; see the derivation
// in activation_plan.h. Returns bytes per block for sequence s, micro-batch b, hidden h, heads a.
struct ActivationFormula {
  double elem_bytes = 2;        // activations
  double stat_bytes = 4;        // LayerNorm mean and rstd, kept in FP32
  double mask_bytes = 0;        // per dropout mask element: 0 when regenerated from the counter RNG
  bool store_dropout_output = false;  // the paper keeps dropout(softmax) for the attention-value product
};
double block_activation_bytes(const ActivationFormula& f, double s, double b, double h, double a);

}  // namespace gpt
