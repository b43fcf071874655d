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
// fp8: the stored inputs of an FP8 block's linear layers (ln1, atty, ln2, fch_gelu) take 1 byte per value
// (e = 1 for those four) and backward adds fp8.output_grad [b,s,4h] of E5M2 when it casts gradients.
#pragma once

#include "config/config.h"
#include "core/arena.h"
#include "memory/recompute.h"
#include "precision/recipe.h"

#include <array>
#include <string>
#include <vector>

namespace gpt {

enum class BlockTensor { Ln1, Ln1Mean, Ln1Rstd, Qkv, Atty, Probs, Residual2, Ln2, Ln2Mean, Ln2Rstd, Fch, FchGelu, Out, Count };
inline constexpr int kBlockTensors = static_cast<int>(BlockTensor::Count);
const char* block_tensor_name(BlockTensor t);

// What a buffer is for, the rows of the ledger.
enum class ActivationUse { BlockStored, BlockInput, RecomputeWorkspace, Head, Scratch, Count };
inline constexpr int kActivationUses = static_cast<int>(ActivationUse::Count);
const char* activation_use_name(ActivationUse u);

struct ActivationPlan {
  ArenaLayout layout{"activations"};
  std::vector<ActivationUse> use;  // per layout buffer
  // block_buffer[l][kind]: index into layout, or -1 when the backend does not need it (probs with
  // a fused attention).
  std::vector<std::array<int, kBlockTensors>> block_buffer;
  RecomputePolicy policy;

  uint64_t bytes(ActivationUse u) const;
  uint64_t total_bytes() const { return layout.total_bytes(); }
};

struct ActivationShape {
  int batch_size = 1;
  int seq_len = 1;
  DType dtype = DType::F32;
  bool keeps_probs = true;  // Backend::attention_keeps_probs()
  // fp8 recipe: the blocks whose linear layers take FP8 inputs (stored in E4M3 where dtype is 16-bit,
  // i.e. in the GPU's layout; the CPU emulation stores F32), and whether backward casts output
  // gradients to E5M2, which needs a [b,s,4h] buffer.
  std::vector<bool> fp8_blocks;
  bool fp8_output_grads = false;
};

// The shape's FP8 fields from a precision recipe.
void set_fp8_fields(ActivationShape& shape, const PrecisionRecipe& recipe, int n_layer);

ActivationPlan plan_activations(const ModelConfig& model, const ActivationShape& shape, const RecomputePolicy& policy);

}  // namespace gpt
