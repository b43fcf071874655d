// What the fused attention's kernels (flash_attention.cu, flash_attention_tiled.cu,
// flash_attention_scalar.cu) share: their parameters, checked once from the op's arguments, the dropout
// rule, and the tiled and scalar kernels' launchers.
#pragma once

#include "backend/op_args.h"
#include "common/cuda_api.h"
#include "core/philox.h"

#include <cstdint>

namespace gpt::cuda {

// The CPU's rule (src/cpu/dropout.h): element e is kept iff stream.word(e) >= threshold, and a kept
// value is multiplied by 1/(1-p) rounded to FP32, as the CPU's FP32 attention multiplies.
struct FlashDropout {
  RngStream stream;
  uint32_t threshold = 0;
  float scale = 1.0f;
  bool active = false;

  GPT_HOST_DEVICE float keep_factor(uint32_t word) const { return word >= threshold ? scale : 0.0f; }
  GPT_HOST_DEVICE static uint32_t pick(const Philox4& w, uint32_t i) {
    return i == 0 ? w.v[0] : i == 1 ? w.v[1] : i == 2 ? w.v[2] : w.v[3];
  }
  // The factor (0 or 1/(1-p)) of element e.
  GPT_HOST_DEVICE float factor(uint64_t e) const {
    return keep_factor(pick(stream.block(e >> 2), static_cast<uint32_t>(e & 3)));
  }
  // The factors of elements e and e + 1, from one Philox block unless the pair straddles two.
  GPT_HOST_DEVICE void pair(uint64_t e, float& f0, float& f1) const {
    const Philox4 w = stream.block(e >> 2);
    const auto i = static_cast<uint32_t>(e & 3);
    f0 = keep_factor(pick(w, i));
    f1 = i == 3 ? factor(e + 1) : keep_factor(pick(w, i + 1));
  }
};

struct FlashParams {
  const void* qkv = nullptr;
  void* out = nullptr;     // the forward's output (read by the backward's delta kernel)
  float* lse = nullptr;    // [B,NH,T]
  DType dtype = DType::BF16;
  int64_t T = 0, C = 0, head_size = 0, batch_heads = 0;
  int heads = 1;
  float scale = 1.0f;       // 1/sqrt(hs)
  float scale_log2 = 1.0f;  // scale * log2(e): the kernels exponentiate with exp2f
  FlashDropout dropout;
};

struct FlashBackwardParams : FlashParams {
  const void* dout = nullptr;
  void* dqkv = nullptr;
  float* delta = nullptr;  // [B,NH,T]: rowsum(dout ⊙ out)
  // Whether out is in qkv's format. Not in an FP8 recipe, which keeps the attention output only as the
  // E4M3 input of its projection: there D comes from the probabilities instead (attention_delta).
  bool out_in_compute_format = true;
};

// Checked shapes and formats (errors name the op, the tensor and what it should be); out in qkv's format
// unless any_out_format (the backward, which then does not read it).
FlashParams flash_params(const Tensor& qkv, const Tensor& out, const Tensor& lse, int n_head, const DropoutSpec& dropout,
                         const char* op, bool any_out_format = false);
FlashBackwardParams flash_backward_params(const AttentionBackwardArgs& args);

// The fused kernels' grid: blocks of rows_per_block rows of a head along x, the B x n_head heads along y
// (at most 65535, checked with a clear error).
dim3 fused_attention_grid(const FlashParams& p, int64_t rows_per_block);

// The tiled kernels (flash_attention_tiled.cu): any format the recipes compute in and head sizes up to
// kMaxTiledHeadSize, on FP32 FMAs through shared-memory tiles, on a device whose blocks may hold their
// tiles (shared_per_block_optin, DeviceContext): 75 KiB at head sizes past 64, 43 KiB up to 64, so
// Turing's 64 KiB takes head sizes past 64 to the scalar kernels.
bool tiled_attention_fits(int64_t head_size, size_t shared_per_block_optin);
void tiled_flash_forward(const FlashParams& p, cudaStream_t stream);
void tiled_flash_backward(const FlashBackwardParams& p, cudaStream_t stream);
// p.delta = rowsum(Pd ⊙ dPd) from recomputed probabilities (attention_delta's path for an output stored
// in another format), where tiled_attention_fits.
void tiled_attention_delta_from_probabilities(const FlashBackwardParams& p, cudaStream_t stream);
// The scalar kernels: the head sizes past kMaxTiledHeadSize (or whose tiles do not fit), up to
// kMaxScalarHeadSize; no dynamic shared memory.
void scalar_flash_forward(const FlashParams& p, cudaStream_t stream);
void scalar_flash_backward(const FlashBackwardParams& p, cudaStream_t stream);
// p.delta = rowsum(dout ⊙ out) per (head, row), for both backward kernels; with out in another format,
// rowsum(Pd ⊙ dPd) (the same value) from recomputed probabilities, exact where an E4M3 out (3 mantissa
// bits) would give D to about 6%. tiled: whether that path may take the tiled kernels (tiled_attention_fits).
void attention_delta(const FlashBackwardParams& p, bool tiled, cudaStream_t stream);

}  // namespace gpt::cuda
