// Maxima across a warp and across a block, the companions of block_reduce.cuh's sums for the row kernels
// that subtract a row's maximum (softmax). A maximum is exact in any order, so only NaN needs care:
// fmaxf drops a NaN operand, so a row with a NaN would silently lose it; these propagate it instead, as
// the CPU's lane_max does for a NaN it meets (x > m is false, so m keeps the NaN once it holds one, and
// a NaN anywhere makes the sum that follows NaN in any case).
#pragma once

#include "common/cuda_api.h"

#include <cmath>

namespace gpt::cuda {

__device__ __forceinline__ float nan_max(float a, float b) { return (a != a || b != b) ? a + b : fmaxf(a, b); }

// The maximum over the `width` lanes of each aligned group of `width` (a power of two up to the warp), as
// block_reduce.cuh's group_sum. Every lane of the warp must call it.
__device__ __forceinline__ float group_max(float v, int width) {
  for (int offset = width / 2; offset > 0; offset /= 2) v = nan_max(v, __shfl_xor_sync(0xFFFFFFFFu, v, offset));
  return v;
}

__device__ __forceinline__ float warp_max(float v) { return group_max(v, warpSize); }

// Every thread gets the block's maximum. blockDim.x a multiple of 32, one-dimensional; ends with a
// barrier, so it may be called again at once.
__device__ __forceinline__ float block_max(float v) {
  __shared__ float warp_maxima[32];
  const int lane = threadIdx.x % warpSize, warp = threadIdx.x / warpSize;
  const int warps = blockDim.x / warpSize;
  v = warp_max(v);
  if (lane == 0) warp_maxima[warp] = v;
  __syncthreads();
  v = lane < warps ? warp_maxima[lane] : -INFINITY;
  v = warp_max(v);
  __syncthreads();
  return v;
}

}  // namespace gpt::cuda
