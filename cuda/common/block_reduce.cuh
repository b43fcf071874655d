// Sums across a warp and across a block, for the kernels that reduce rows (layernorm, softmax, norms).
// The warp sum is a butterfly of __shfl_xor_sync, so every lane ends with the same total, summed in the
// same order on every lane; the block sum adds the warps' totals in warp order, so the result does not
// depend on how the hardware (or the emulator) schedules the warps.
#pragma once

#include "common/cuda_api.h"

namespace gpt::cuda {

// The sum over the `width` lanes of each aligned group of `width` (a power of two up to the warp): a
// butterfly within the group, the same order on every run. Every lane of the warp must call it.
__device__ __forceinline__ float group_sum(float v, int width) {
  for (int offset = width / 2; offset > 0; offset /= 2) v += __shfl_xor_sync(0xFFFFFFFFu, v, offset);
  return v;
}

__device__ __forceinline__ float warp_sum(float v) { return group_sum(v, warpSize); }

// Every thread of the block gets the block's sum. blockDim.x must be a multiple of 32 (whole warps) and
// the block one-dimensional. Ends with a barrier, so the scratch can be reused by the next call.
__device__ __forceinline__ float block_sum(float v) {
  __shared__ float warp_totals[32];
  const int lane = threadIdx.x % warpSize, warp = threadIdx.x / warpSize;
  const int warps = blockDim.x / warpSize;
  v = warp_sum(v);
  if (lane == 0) warp_totals[warp] = v;
  __syncthreads();
  v = lane < warps ? warp_totals[lane] : 0.0f;
  v = warp_sum(v);
  __syncthreads();
  return v;
}

}  // namespace gpt::cuda
