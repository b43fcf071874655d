// Causal self-attention, fused (flash-style): no [B,NH,T,T] matrix in memory. The CUDA backend's
// attention when it reports attention_keeps_probs = false; the math, layout and kernels are in
// flash_attention.cu (tensor cores, BF16/F16, head sizes 64 and 128), flash_attention_tiled.cu (FP32,
// and any head size up to kMaxTiledHeadSize, on FP32 FMAs through shared-memory tiles) and
// flash_attention_scalar.cu (head sizes past that, up to kMaxScalarHeadSize: correct, slow).
#pragma once

#include "backend/op_args.h"
#include "common/device_context.h"

#include <cstdint>

namespace gpt::cuda {

// args.probs is [B,NH,T] F32, written: each query row's log-sum-exp of its scaled scores.
void flash_attention_forward(const AttentionForwardArgs& args, const DeviceContext& ctx);
// args.probs is the forward's log-sum-exp, args.out its output; args.dprobs [B,NH,T] F32 scratch (each
// row's dout . out); dqkv is overwritten.
void flash_attention_backward(const AttentionBackwardArgs& args, const DeviceContext& ctx);

// The oldest compute capability of the tensor-core kernels (cp.async, mma.m16n8k16: Ampere); on Turing
// (7.5) every format takes the tiled or scalar kernels.
inline constexpr int kMinTensorCoreAttentionCapability = 80;

// Whether (format, head size) runs on the tensor-core kernels on a device of this compute capability
// (major * 10 + minor), rather than the tiled or scalar ones.
bool flash_attention_uses_tensor_cores(DType dtype, int64_t head_size, int compute_capability);

// The largest head size the tiled FP32 kernels take (their per-thread accumulators are kept in registers,
// head size / 16 columns of 4 rows), and the largest the scalar ones take (their per-thread accumulators
// are arrays of this size, in local memory).
inline constexpr int64_t kMaxTiledHeadSize = 128;
inline constexpr int64_t kMaxScalarHeadSize = 256;

// The dropout mask's flat element of (head bh = b*NH + h, query row t, key column t2), as the CPU keys it:
// 64-bit throughout, since B*NH*T*T passes 2^32 at T = 4096 with 256 heads in the batch.
GPT_HOST_DEVICE uint64_t attention_mask_element(int64_t bh, int64_t T, int64_t t, int64_t t2) {
  return (static_cast<uint64_t>(bh) * static_cast<uint64_t>(T) + static_cast<uint64_t>(t)) * static_cast<uint64_t>(T) +
         static_cast<uint64_t>(t2);
}

}  // namespace gpt::cuda
