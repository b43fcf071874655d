// One new position's causal attention over a KV cache, every head in one launch (AttentionDecodeArgs):
//   k_h[t-1] = k,  v_h[t-1] = v,  s_j = scale * q_h . k_h[j],  p = softmax(s),  out[h*hs + i] = sum_j p_j v_h[j][i]
// over j < t = length. Layout: qkv [3C] (q, k, v of head h at h*hs, C + h*hs, 2C + h*hs); the caches
// [NH, capacity, hs] in qkv's format; scratch [NH, capacity] F32.
// A head's positions are split into chunks of about kDecodeChunkLength (at most kMaxDecodeChunks, longer
// past that; attention_decode.h), one block per (head, chunk), as FlashDecoding (Dao et al., 2023) splits
// a long cache so that a few heads still spread over many multiprocessors; the chunking depends on t and
// NH alone, not on the device, so every GPU sums in the same order. A block first writes the position's
// key and value rows into its head's cache if row t-1 is in its chunk, and keeps q in shared memory; the
// barrier after makes those rows visible to the whole block. The caches are read in packs of 8 elements
// (a 16-byte load for BF16/F16, two for F32) where the head size and alignment allow.
// Scores: a key takes `width` lanes (a pack each, a power of two up to the warp: 8 lanes for head size 64,
// so a warp reads 4 keys at a time), a lane sums its packs' products in order and a butterfly within the
// lane group adds them (the same order on every run); the scores go to the head's scratch row, which
// then holds e_j = exp(s_j - m) with m the chunk's maximum and l = sum_j e_j. Output: the threads are
// groups of hs/8 (one pack of dimensions each), group g summing e_j v_h[j] over the chunk's j = j0 + g,
// j0 + g + groups, ...; the groups' partial sums (shared memory) are added in group order. With one chunk
// the block stores out = o / l itself (1/l multiplied into each term, as the CPU's softmax then product
// has it). With several, each block leaves (m, l, o) in the backend's scratch and a second kernel
// combines a head's chunks in chunk order:
//   M = max_c m_c,  L = sum_c l_c e^(m_c - M),  out = sum_c o_c e^(m_c - M) / L.
// Every sum has a fixed order, so the result is bitwise reproducible, and FP32 throughout; it differs
// from the CPU's composition of ops (cpu/attention_decode.cpp) only in the order of its sums.
// It replaces, per layer, the decoder's 5 launches a head (2 copies, 2 one-row products and a softmax) by
// one or two. Not tuned on a GPU: the chunk length is FlashDecoding's order of magnitude, not a measured
// optimum.
#include "kernels/attention_decode.h"

#include "backend/op_checks.h"
#include "common/block_reduce.cuh"
#include "common/cuda_check.h"
#include "common/launch.cuh"
#include "common/tensor_access.cuh"
#include "common/vector_access.cuh"

#include <algorithm>

namespace gpt::cuda {
namespace {

constexpr int kThreads = 128;
constexpr int kMaxHeadSize = kThreads * kPack;  // a row's packs fit one pass of the block's threads

// A block's partial result over its chunk: m, l, then o [hs] (unnormalised), in the backend's scratch.
template <class F>
__device__ __forceinline__ F* chunk_partial(F* partials, int64_t head, int chunk, int chunks, int hs) {
  return partials + (head * chunks + chunk) * (static_cast<int64_t>(hs) + 2);
}

// grid (NH, chunks), kThreads threads: block (h, c) attends to positions
// [c * chunk_length, min(t, (c + 1) * chunk_length)). Rows are read in packs of kPack elements (one
// 16-byte load for BF16/F16, two for F32) when `vector` (vector_access.cuh), element by element otherwise.
// At least 8 blocks a multiprocessor (64 registers a thread): with the thread count alone, ptxas (CUDA 13,
// sm_90) held the kernel to 40 registers and spilled.
__global__ void __launch_bounds__(kThreads, 8)
    attention_decode_kernel(TensorRef out, TensorRef qkv, TensorRef k_cache, TensorRef v_cache, float* scratch,
                            float* partials, int64_t capacity, int hs, int64_t t, int64_t chunk_length, float scale,
                            int width, bool vector) {
  const int h = blockIdx.x, c = blockIdx.y, chunks = gridDim.y;
  const int64_t C = static_cast<int64_t>(gridDim.x) * hs;
  const int64_t j0 = c * chunk_length, j1 = std::min(t, j0 + chunk_length);
  const int packs = (hs + kPack - 1) / kPack;  // a row's packs, the last short when kPack does not divide hs
  float* q = dynamic_shared_memory<float>();   // [hs]
  float* partial = q + hs;                     // [groups, hs]
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

  // Scores: `width` lanes a key (a power of two, a pack each, up to the warp), so a warp takes 32 / width
  // keys at a time; a lane sums its packs' products in order, the group's butterfly adds the lanes.
  float* s = scratch + head;
  const int lane = threadIdx.x % warpSize, warp = threadIdx.x / warpSize;
  const int keys_per_warp = warpSize / width, stride = blockDim.x / warpSize * keys_per_warp;
  const int slot = lane / width, sub = lane % width;
  float local_max = -INFINITY;
  for (int64_t base = j0 + warp * keys_per_warp; base < j1; base += stride) {  // uniform across the warp
    const int64_t j = base + slot;
    float dot = 0.0f;
    if (j < j1) {
      for (int p = sub; p < packs; p += width) {
        const int count = std::min(int{kPack}, hs - p * kPack);
        float k[kPack];  // past count: 0, as is the q it meets
        load_values(k_cache, (head + j) * hs + p * kPack, count, vector, k);
        for (int e = 0; e < kPack; ++e) dot += (e < count ? q[p * kPack + e] : 0.0f) * k[e];
      }
    }
    dot = group_sum(dot, width) * scale;
    if (j < j1) {
      if (sub == 0) s[j] = dot;
      local_max = nan_max(local_max, dot);
    }
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

  // Output: groups of `packs` threads, thread p of group g summing e_j v_h[j] over its pack's dimensions
  // for j = j0 + g, j0 + g + groups, ...; the groups' sums are added in group order below.
  const int groups = blockDim.x / packs, g = threadIdx.x / packs, p = threadIdx.x % packs;
  if (g < groups) {
    const int count = std::min(int{kPack}, hs - p * kPack);
    float acc[kPack] = {};
    for (int64_t j = j0 + g; j < j1; j += groups) {
      float v[kPack];
      load_values(v_cache, (head + j) * hs + p * kPack, count, vector, v);
      const float w = s[j] * weight;
      for (int e = 0; e < kPack; ++e) acc[e] += w * v[e];
    }
    for (int e = 0; e < kPack; ++e)  // a fixed trip count, so acc stays in registers
      if (e < count) partial[g * hs + p * kPack + e] = acc[e];
  }
  __syncthreads();
  float* result = chunks == 1 ? nullptr : chunk_partial(partials, h, c, chunks, hs);
  if (result && threadIdx.x == 0) result[0] = chunk_max, result[1] = chunk_sum;
  const float out_scale = write_scale(out);
  Fp8Tally tally;
  for (int k = threadIdx.x; k < hs; k += blockDim.x) {
    float o = 0.0f;
    for (int group = 0; group < groups; ++group) o += partial[group * hs + k];
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
  const int packs = (hs + kPack - 1) / kPack;
  const size_t shared = static_cast<size_t>(hs) * (1 + kThreads / packs) * sizeof(float);
  // Packs only where every row starts on a pack boundary of aligned memory.
  const bool vector = hs % kPack == 0 && pack_aligned(args.k_cache) && pack_aligned(args.v_cache);
  float* partials = static_cast<float*>(ctx.scratch);
  launch<attention_decode_kernel>(dim3(static_cast<unsigned>(s.heads), static_cast<unsigned>(split.chunks)),
                                  dim3(kThreads), shared, ctx.stream, tensor_ref(args.out), tensor_ref(args.qkv),
                                  tensor_ref(args.k_cache), tensor_ref(args.v_cache),
                                  static_cast<float*>(args.scratch.data), partials, s.capacity, hs, args.length,
                                  split.length, args.scale, lanes_per_row(packs), vector);
  if (split.chunks == 1) return;
  launch<attention_decode_combine_kernel>(dim3(static_cast<unsigned>(s.heads)),
                                          dim3(static_cast<unsigned>(std::min(kMaxHeadSize, (hs + 31) / 32 * 32))), 0,
                                          ctx.stream, tensor_ref(args.out), partials, hs,
                                          static_cast<int>(split.chunks));
}

}  // namespace gpt::cuda
