// Where every activation of a training step lives, given the recompute policy. The plan is the
// activation arena's layout: the ledger reads its sizes, the model takes its views, so what was
// planned is exactly what is allocated.
//
// Per block l (s = T, b = B, h = C, a = NH; element size e; with a BF16/F16 activation dtype, mean/rstd,
// probs and the losses stay FP32, as the mixed-precision recipes keep them):
//   ln1 [b,s,h]  qkv [b,s,3h]  atty [b,s,h]  probs [b,a,s,s]  residual2 [b,s,h]  ln2 [b,s,h]
//   fch [b,s,4h]  fch_gelu [b,s,4h]  ln1/ln2 mean+rstd 4 x [b,s]  out [b,s,h] (the next block's input)
// Mode none keeps all of them: e*sbh*(1+3+1+1+1+4+4) + e*a*s^2*b + 4e*sb per block, plus the output.
// The branch outputs (attention and MLP projections) go to one shared scratch buffer: backward of
// out = residual + dropout(x) needs only the mask, which is regenerated, never stored.
// Selective stores the listed kinds in one shared scratch buffer each instead of per block.
// Full with every k keeps the input of each segment of k blocks. In backward a segment is rerun once
// from its input to rebuild the blocks' outputs (k-1 buffers), then each block is rerun again, last
// to first, into a single block-sized workspace just before its backward. Memory is
// (L/k + k - 1) block inputs + one block's internals, the O(k + L/k) of the classic sqrt(L) scheme
// (Chen et al. 2016), minimised at k = sqrt(L); the price is 2k-1 block forwards per segment
// (k = 1: exactly one extra forward of every block).
// Formats: every buffer takes the format the precision layout gives its tensor (precision_layout.h), so
// bf16 activations take 2 bytes and an FP8 block's linear inputs 1. A buffer several blocks share (the
// recompute workspace, the selective scratch, fp8.output_grad) is sized for the widest format it holds.
// fp8 adds fp8.output_grad [b,s,4h] E5M2 when backward casts gradients, and fp8.source [b,s,4h] FP32 under
// current scaling (an FP8 input before its cast).
// On a backend that stages FP8 operands (cuBLASLt: TN only), fp8 adds fp8.staging, the bytes of the largest
// FP8 block product's copies (backend/matmul_staging.h), live for one product and shared by all. Backward
// e5m2: the weight gradient dW = dout^T in takes both operands transposed, s*b*(IC + OC) bytes with s*b
// rounded up to a multiple of 16 (cuBLASLt's FP8 K), 5sbh for fc and fc_proj; the input gradient
// dx = dout W a transposed weight, OC*IC bytes. Backward bf16: the FP8 operand widened, 8sbh for
// fc_proj's input, 8h^2 for its weight. The buffer is the largest of these.
// The weights' transposes are made per product, not once per optimizer step beside the compute copy: a
// kept copy would add 12h^2 bytes per FP8 block (81 MiB for GPT-2 124M) to save re-transposing them, a
// pass over 12h^2 bytes per block per micro-batch.
#pragma once

#include "config/config.h"
#include "core/arena.h"
#include "memory/recompute.h"
#include "precision/precision_layout.h"

#include <array>
#include <string>
#include <vector>

namespace gpt {

// What a buffer is for, the rows of the ledger.
enum class ActivationUse { BlockStored, BlockInput, RecomputeWorkspace, Head, Scratch, Count };
inline constexpr int kActivationUses = static_cast<int>(ActivationUse::Count);
const char* activation_use_name(ActivationUse u);

struct ActivationPlan {
  ArenaLayout layout{"activations"};
  std::vector<ActivationUse> use;  // per layout buffer
  // block_buffer[l][kind]: index into layout (probs: the log-sum-exp with a fused attention).
  std::vector<std::array<int, kBlockTensors>> block_buffer;
  // model_buffer[tensor]: index into layout, or -1 when this configuration does not need it.
  std::array<int, kModelTensors> model_buffer{};
  // Index into layout of fp8.staging (U8), the FP8 products' MatmulArgs::staging, or -1.
  int matmul_staging = -1;
  RecomputePolicy policy;

  uint64_t bytes(ActivationUse u) const;
  uint64_t total_bytes() const { return layout.total_bytes(); }
};

// The largest micro-batch the activations are planned for.
struct MicroBatch {
  int batch_size = 1;
  int seq_len = 1;
};

// keeps_probs: Backend::attention_keeps_probs(). A fused attention stores no [b,a,s,s] probabilities:
// the probs slot holds each row's log-sum-exp, [b,a,s] F32 ("blockL.lse"), kept per block even under
// selective recomputation of attention, which then has nothing to rebuild.
// stages_fp8_operands: BackendCapabilities::stages_fp8_operands.
ActivationPlan plan_activations(const ModelConfig& model, const PrecisionLayout& precision, MicroBatch micro,
                                bool keeps_probs, const RecomputePolicy& policy, bool stages_fp8_operands = false);

// The staging bytes of the largest product of the FP8 blocks' linear layers (forward, input gradient and
// weight gradient), for a micro-batch of `rows` = B*T tokens; 0 without FP8 blocks.
uint64_t fp8_staging_bytes(const ModelConfig& model, const PrecisionLayout& precision, int64_t rows);

}  // namespace gpt
