// Block reductions of any operation and type (double sums, maxima, integer counts), for reductions whose
// result must not depend on scheduling: a butterfly of __shfl_xor_sync within each warp (every lane ends
// with the same value, combined in the same order on every lane), then the warps' values combined in warp
// order by the first warp. block_reduce.cuh's block_sum is the FP32 sum of this shape.
#pragma once

#include "common/cuda_api.h"

namespace gpt::cuda {

struct SumOp {
  template <class T>
  __device__ __forceinline__ T operator()(T a, T b) const { return a + b; }
};
struct MaxOp {
  template <class T>
  __device__ __forceinline__ T operator()(T a, T b) const { return a > b ? a : b; }
};
struct OrOp {
  template <class T>
  __device__ __forceinline__ T operator()(T a, T b) const { return a | b; }
};

template <class T, class Op>
__device__ __forceinline__ T warp_reduce(T v, Op op) {
  for (int offset = warpSize / 2; offset > 0; offset /= 2) v = op(v, __shfl_xor_sync(0xFFFFFFFFu, v, offset));
  return v;
}

// Every thread of the block gets op over the block's values. blockDim.x must be a multiple of 32 and the
// block one-dimensional; identity is op's neutral element (0 for sums, the lowest value for maxima). Ends
// with a barrier, so it may be called again at once.
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

}  // namespace gpt::cuda
