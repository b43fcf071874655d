// Reductions across a group of lanes, a warp and a block, of any operation and type (FP32 and double
// sums, maxima, integer counts), for the kernels that reduce rows (layernorm, softmax, attention, norms,
// amax). The result must not depend on scheduling, so the order is fixed: a butterfly of
// __shfl_xor_sync within each group or warp (every lane ends with the same value, combined in the same
// order on every lane), then the warps' values combined in warp order by the first warp, whatever order
// the hardware (or the emulator) runs the warps in.
#pragma once

#include "common/cuda_api.h"

#include <cmath>

namespace gpt::cuda {

struct SumOp {
  template <class T>
  __device__ __forceinline__ T operator()(T a, T b) const { return a + b; }
};
// For values that cannot be NaN (amax tallies, counts).
struct MaxOp {
  template <class T>
  __device__ __forceinline__ T operator()(T a, T b) const { return a > b ? a : b; }
};
struct OrOp {
  template <class T>
  __device__ __forceinline__ T operator()(T a, T b) const { return a | b; }
};

// The maximum for rows whose maximum is subtracted (softmax, attention). A maximum is exact in any order,
// so only NaN needs care: fmaxf drops a NaN operand, so a row with a NaN would silently lose it; this
// propagates it instead, as the CPU's lane_max does for a NaN it meets (x > m is false, so m keeps the
// NaN once it holds one, and a NaN anywhere makes the sum that follows NaN in any case).
__device__ __forceinline__ float nan_max(float a, float b) { return (a != a || b != b) ? a + b : fmaxf(a, b); }
struct NanMaxOp {
  __device__ __forceinline__ float operator()(float a, float b) const { return nan_max(a, b); }
};

// op over the `width` lanes of each aligned group of `width` (a power of two up to the warp): a butterfly
// within the group, the same order on every run. Every lane of the warp must call it.
template <class T, class Op>
__device__ __forceinline__ T group_reduce(T v, int width, Op op) {
  for (int offset = width / 2; offset > 0; offset /= 2) v = op(v, __shfl_xor_sync(0xFFFFFFFFu, v, offset));
  return v;
}

template <class T, class Op>
__device__ __forceinline__ T warp_reduce(T v, Op op) {
  return group_reduce(v, warpSize, op);
}

// Every thread of the block gets op over the block's values. blockDim.x must be a multiple of 32 (whole
// warps) and the block one-dimensional; identity is op's neutral element (0 for sums, the lowest value
// for maxima). Ends with a barrier, so the scratch can be reused by the next call at once.
template <class T, class Op>
__device__ __forceinline__ T block_reduce(T v, Op op, T identity) {
  __shared__ T warp_totals[32];
  const int lane = threadIdx.x % warpSize, warp = threadIdx.x / warpSize;
  const int warps = blockDim.x / warpSize;
  v = warp_reduce(v, op);
  if (lane == 0) warp_totals[warp] = v;
  __syncthreads();
  v = lane < warps ? warp_totals[lane] : identity;
  v = warp_reduce(v, op);
  __syncthreads();
  return v;
}

// The FP32 sums and NaN-propagating maxima the row kernels name.
__device__ __forceinline__ float group_sum(float v, int width) { return group_reduce(v, width, SumOp{}); }
__device__ __forceinline__ float warp_sum(float v) { return warp_reduce(v, SumOp{}); }
__device__ __forceinline__ float block_sum(float v) { return block_reduce(v, SumOp{}, 0.0f); }
__device__ __forceinline__ float group_max(float v, int width) { return group_reduce(v, width, NanMaxOp{}); }
__device__ __forceinline__ float block_max(float v) { return block_reduce(v, NanMaxOp{}, -INFINITY); }

}  // namespace gpt::cuda
