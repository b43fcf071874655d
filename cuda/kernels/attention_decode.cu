// One new position's causal attention over a KV cache, every head in one launch (AttentionDecodeArgs):
//   k_h[t-1] = k,  v_h[t-1] = v,  s_j = scale * q_h . k_h[j],  p = softmax(s),  out[h*hs + i] = sum_j p_j v_h[j][i]
// over j < t = length. Layout: qkv [3C] (q, k, v of head h at h*hs, C + h*hs, 2C + h*hs); the caches
// [NH, capacity, hs] in qkv's format; scratch [NH, capacity] F32.
// One block per head. The block first writes the position's key and value rows into its head's cache
// and keeps q in shared memory; the barrier after makes those rows visible to the whole block, which
// reads them back as row t-1. Scores: each warp takes positions j = warp, warp + warps, ..., its lanes
// split the head's dimensions and warp_sum adds them (a butterfly, the same order on every run); the
// scores go to the head's scratch row, which then holds exp(s_j - max). Output: the threads are
// groups of hs, group g summing p_j v_h[j][i] over j = g, g + groups, ...; the groups' partial sums
// (shared memory) are added in group order. Every sum has a fixed order, so the result is bitwise
// reproducible, and FP32 throughout; it differs from the CPU's composition of ops (cpu/attention_decode.cpp)
// only in the order of its sums.
// It replaces, per layer, the decoder's 5 launches a head (2 copies, 2 one-row products and a softmax) by
// one. Not tuned: NH blocks are few for a large GPU, and a head's keys are read by one multiprocessor (a
// split over positions, as FlashDecoding does, would spread a long cache over more of them).
#include "kernels/attention_decode.h"

#include "backend/op_checks.h"
#include "common/block_max.cuh"
#include "common/block_reduce.cuh"
#include "common/cuda_check.h"
#include "common/launch.cuh"
#include "common/tensor_access.cuh"

#include <algorithm>

namespace gpt::cuda {
namespace {

constexpr int kMinThreads = 128;
constexpr int kMaxHeadSize = 1024;

__global__ void __launch_bounds__(kMaxHeadSize)
    attention_decode_kernel(TensorRef out, TensorRef qkv, TensorRef k_cache, TensorRef v_cache, float* scratch,
                            int64_t capacity, int hs, int64_t t, float scale) {
  const int h = blockIdx.x;
  const int64_t C = static_cast<int64_t>(gridDim.x) * hs;
  const int groups = blockDim.x / hs;
  float* q = dynamic_shared_memory<float>();  // [hs]
  float* partial = q + hs;                    // [groups, hs]
  const int64_t head = static_cast<int64_t>(h) * capacity;  // the head's first row, in rows of hs
  const int64_t last = (head + t - 1) * hs;
  for (int i = threadIdx.x; i < hs; i += blockDim.x) {
    q[i] = load(qkv, h * hs + i);
    store(k_cache, last + i, load(qkv, C + h * hs + i));
    store(v_cache, last + i, load(qkv, 2 * C + h * hs + i));
  }
  __syncthreads();

  float* s = scratch + head;
  const int lane = threadIdx.x % warpSize, warp = threadIdx.x / warpSize, warps = blockDim.x / warpSize;
  float local_max = -INFINITY;
  for (int64_t j = warp; j < t; j += warps) {
    const int64_t key = (head + j) * hs;
    float dot = 0.0f;
    for (int i = lane; i < hs; i += warpSize) dot += q[i] * load(k_cache, key + i);
    dot = warp_sum(dot) * scale;
    if (lane == 0) s[j] = dot;
    local_max = nan_max(local_max, dot);
  }
  const float row_max = block_max(local_max);

  float sum = 0.0f;
  for (int64_t j = threadIdx.x; j < t; j += blockDim.x) {
    const float e = expf(s[j] - row_max);
    s[j] = e;
    sum += e;
  }
  const float inv_sum = 1.0f / block_sum(sum);

  const int i = threadIdx.x % hs, g = threadIdx.x / hs;
  if (g < groups) {
    float acc = 0.0f;
    for (int64_t j = g; j < t; j += groups) acc += s[j] * inv_sum * load(v_cache, (head + j) * hs + i);
    partial[g * hs + i] = acc;
  }
  __syncthreads();
  const float out_scale = write_scale(out);
  Fp8Tally tally;
  for (int k = threadIdx.x; k < hs; k += blockDim.x) {
    float o = 0.0f;
    for (int p = 0; p < groups; ++p) o += partial[p * hs + k];
    store(out, h * hs + k, o, out_scale, true, out.scaling ? &tally : nullptr);
  }
  flush_fp8_tally(out.scaling, tally);
}

}  // namespace

void attention_decode(const AttentionDecodeArgs& args, const DeviceContext& ctx) {
  const DecodeShape s = check_attention_decode(args);
  GPT_CHECK(args.scratch.dtype == DType::F32, "attention_decode on CUDA: scratch is {}; it takes F32",
            dtype_name(args.scratch.dtype));
  GPT_CHECK(s.head_size <= kMaxHeadSize, "attention_decode on CUDA: head size {} is above the {} one block covers",
            s.head_size, kMaxHeadSize);
  GPT_CHECK(s.heads <= 0x7FFFFFFF, "attention_decode: {} heads are too many for one grid", s.heads);
  const int hs = static_cast<int>(s.head_size);
  // Whole warps, at least one thread per dimension, and at least kMinThreads, so short heads get groups.
  const int threads = std::min(kMaxHeadSize, (std::max(hs, kMinThreads) + 31) / 32 * 32);
  const size_t shared = static_cast<size_t>(hs) * (1 + threads / hs) * sizeof(float);
  launch<attention_decode_kernel>(dim3(static_cast<unsigned>(s.heads)), dim3(static_cast<unsigned>(threads)), shared,
                                  ctx.stream, tensor_ref(args.out), tensor_ref(args.qkv), tensor_ref(args.k_cache),
                                  tensor_ref(args.v_cache), static_cast<float*>(args.scratch.data), s.capacity, hs,
                                  args.length, args.scale);
}

}  // namespace gpt::cuda
