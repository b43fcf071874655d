// One new position's causal attention over a KV cache, every head in one launch (AttentionDecodeArgs):
//   k_h[t-1] = k,  v_h[t-1] = v,  s_j = scale * q_h . k_h[j],  p = softmax(s),  out[h*hs + i] = sum_j p_j v_h[j][i]
// over j < t = length. Layout: qkv [3C] (q, k, v of head h at h*hs, C + h*hs, 2C + h*hs); the caches
// [NH, capacity, hs] in qkv's format; scratch [NH, capacity] F32.
// A head's positions are split into chunks of kChunkLength (at most kMaxChunks of them, longer past
// that), one block per (head, chunk), as FlashDecoding (Dao et al., 2023) splits a long cache so that
// a few heads still spread over many multiprocessors; the chunking depends on t and NH alone, not on
// the device, so every GPU sums in the same order. A block first writes the position's key and value rows
// into its head's cache if row t-1 is in its chunk, and keeps q in shared memory; the barrier after
// makes those rows visible to the whole block. Scores: each warp takes positions j = j0 + warp,
// j0 + warp + warps, ..., its lanes split the head's dimensions and warp_sum adds them (a butterfly, the
// same order on every run); the scores go to the head's scratch row, which then holds e_j = exp(s_j - m)
// with m the chunk's maximum and l = sum_j e_j. Output: the threads are groups of hs, group g summing
// e_j v_h[j][i] over the chunk's j = j0 + g, j0 + g + groups, ...; the groups' partial sums (shared
// memory) are added in group order. With one chunk the block stores out = o / l itself (1/l multiplied
// into each term, as the CPU's softmax then product has it). With several, each block leaves (m, l, o)
// in the backend's scratch and a second kernel combines a head's chunks in chunk order:
//   M = max_c m_c,  L = sum_c l_c e^(m_c - M),  out = sum_c o_c e^(m_c - M) / L.
// Every sum has a fixed order, so the result is bitwise reproducible, and FP32 throughout; it differs
// from the CPU's composition of ops (cpu/attention_decode.cpp) only in the order of its sums.
// It replaces, per layer, the decoder's 5 launches a head (2 copies, 2 one-row products and a softmax) by
// one or two. Not tuned on a GPU: the chunk length is FlashDecoding's order of magnitude, not a measured
// optimum.
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

// A block's partial result over its chunk: m, l, then o [hs] (unnormalised), in the backend's scratch.
template <class F>
__device__ __forceinline__ F* chunk_partial(F* partials, int64_t head, int chunk, int chunks, int hs) {
  return partials + (head * chunks + chunk) * (static_cast<int64_t>(hs) + 2);
}

// grid (NH, chunks): block (h, c) attends to positions [c * chunk_length, min(t, (c + 1) * chunk_length)).
__global__ void __launch_bounds__(kMaxHeadSize)
    attention_decode_kernel(TensorRef out, TensorRef qkv, TensorRef k_cache, TensorRef v_cache, float* scratch,
                            float* partials, int64_t capacity, int hs, int64_t t, int64_t chunk_length, float scale) {
  const int h = blockIdx.x, c = blockIdx.y, chunks = gridDim.y;
  const int64_t C = static_cast<int64_t>(gridDim.x) * hs;
  const int64_t j0 = c * chunk_length, j1 = std::min(t, j0 + chunk_length);
  const int groups = blockDim.x / hs;
  float* q = dynamic_shared_memory<float>();  // [hs]
  float* partial = q + hs;                    // [groups, hs]
  const int64_t head = static_cast<int64_t>(h) * capacity;  // the head's first row, in rows of hs
  const int64_t last = (head + t - 1) * hs;
  for (int i = threadIdx.x; i < hs; i += blockDim.x) {
    q[i] = load(qkv, h * hs + i);
    if (j1 == t) {
      store(k_cache, last + i, load(qkv, C + h * hs + i));
      store(v_cache, last + i, load(qkv, 2 * C + h * hs + i));
    }
  }
  __syncthreads();

  float* s = scratch + head;
  const int lane = threadIdx.x % warpSize, warp = threadIdx.x / warpSize, warps = blockDim.x / warpSize;
  float local_max = -INFINITY;
  for (int64_t j = j0 + warp; j < j1; j += warps) {
    const int64_t key = (head + j) * hs;
    float dot = 0.0f;
    for (int i = lane; i < hs; i += warpSize) dot += q[i] * load(k_cache, key + i);
    dot = warp_sum(dot) * scale;
    if (lane == 0) s[j] = dot;
    local_max = nan_max(local_max, dot);
  }
  const float chunk_max = block_max(local_max);

  float sum = 0.0f;
  for (int64_t j = j0 + threadIdx.x; j < j1; j += blockDim.x) {
    const float e = expf(s[j] - chunk_max);
    s[j] = e;
    sum += e;
  }
  const float chunk_sum = block_sum(sum);
  const float weight = chunks == 1 ? 1.0f / chunk_sum : 1.0f;

  const int i = threadIdx.x % hs, g = threadIdx.x / hs;
  if (g < groups) {
    float acc = 0.0f;
    for (int64_t j = j0 + g; j < j1; j += groups) acc += s[j] * weight * load(v_cache, (head + j) * hs + i);
    partial[g * hs + i] = acc;
  }
  __syncthreads();
  float* result = chunks == 1 ? nullptr : chunk_partial(partials, h, c, chunks, hs);
  if (result && threadIdx.x == 0) result[0] = chunk_max, result[1] = chunk_sum;
  const float out_scale = write_scale(out);
  Fp8Tally tally;
  for (int k = threadIdx.x; k < hs; k += blockDim.x) {
    float o = 0.0f;
    for (int p = 0; p < groups; ++p) o += partial[p * hs + k];
    if (result)
      result[2 + k] = o;
    else
      store(out, h * hs + k, o, out_scale, true, out.scaling ? &tally : nullptr);
  }
  flush_fp8_tally(out.scaling, tally);
}

// grid (NH): out_h = sum_c o_c e^(m_c - M) / L over the head's chunks in order (the math above).
__global__ void attention_decode_combine_kernel(TensorRef out, const float* partials, int hs, int chunks) {
  const int h = blockIdx.x;
  float m = -INFINITY;
  for (int c = 0; c < chunks; ++c) m = nan_max(m, chunk_partial(partials, h, c, chunks, hs)[0]);
  float total = 0.0f;
  for (int c = 0; c < chunks; ++c) {
    const float* p = chunk_partial(partials, h, c, chunks, hs);
    total += p[1] * expf(p[0] - m);
  }
  const float inv_total = 1.0f / total, out_scale = write_scale(out);
  Fp8Tally tally;
  for (int k = threadIdx.x; k < hs; k += blockDim.x) {
    float o = 0.0f;
    for (int c = 0; c < chunks; ++c) {
      const float* p = chunk_partial(partials, h, c, chunks, hs);
      o += p[2 + k] * expf(p[0] - m);
    }
    store(out, h * hs + k, o * inv_total, out_scale, true, out.scaling ? &tally : nullptr);
  }
  flush_fp8_tally(out.scaling, tally);
}

}  // namespace

DecodeChunks attention_decode_chunks(int64_t heads, int64_t head_size, int64_t length, size_t scratch_bytes) {
  const int64_t per_chunk = heads * (head_size + 2) * static_cast<int64_t>(sizeof(float));
  const int64_t fit = static_cast<int64_t>(scratch_bytes) / std::max<int64_t>(per_chunk, 1);
  const int64_t chunks =
      std::max<int64_t>(1, std::min({(length + kDecodeChunkLength - 1) / kDecodeChunkLength, kMaxDecodeChunks, fit}));
  return {chunks, (length + chunks - 1) / chunks};
}

void attention_decode(const AttentionDecodeArgs& args, const DeviceContext& ctx) {
  const DecodeShape s = check_attention_decode(args);
  GPT_CHECK(args.scratch.dtype == DType::F32, "attention_decode on CUDA: scratch is {}; it takes F32",
            dtype_name(args.scratch.dtype));
  GPT_CHECK(s.head_size <= kMaxHeadSize, "attention_decode on CUDA: head size {} is above the {} one block covers",
            s.head_size, kMaxHeadSize);
  GPT_CHECK(s.heads <= 0x7FFFFFFF, "attention_decode: {} heads are too many for one grid", s.heads);
  const int hs = static_cast<int>(s.head_size);
  const DecodeChunks split = attention_decode_chunks(s.heads, s.head_size, args.length, ctx.scratch_bytes);
  // Whole warps, at least one thread per dimension, and at least kMinThreads, so short heads get groups.
  const int threads = std::min(kMaxHeadSize, (std::max(hs, kMinThreads) + 31) / 32 * 32);
  const size_t shared = static_cast<size_t>(hs) * (1 + threads / hs) * sizeof(float);
  float* partials = static_cast<float*>(ctx.scratch);
  launch<attention_decode_kernel>(dim3(static_cast<unsigned>(s.heads), static_cast<unsigned>(split.chunks)),
                                  dim3(static_cast<unsigned>(threads)), shared, ctx.stream, tensor_ref(args.out),
                                  tensor_ref(args.qkv), tensor_ref(args.k_cache), tensor_ref(args.v_cache),
                                  static_cast<float*>(args.scratch.data), partials, s.capacity, hs, args.length,
                                  split.length, args.scale);
  if (split.chunks == 1) return;
  launch<attention_decode_combine_kernel>(dim3(static_cast<unsigned>(s.heads)),
                                          dim3(static_cast<unsigned>(std::min(kMaxHeadSize, (hs + 31) / 32 * 32))), 0,
                                          ctx.stream, tensor_ref(args.out), partials, hs,
                                          static_cast<int>(split.chunks));
}

}  // namespace gpt::cuda
