// The fused attention on FP32 FMAs through shared-memory tiles: the fp32 recipe's attention, and BF16/F16
// at the head sizes the tensor-core kernels do not take, up to kMaxTiledHeadSize. The math is
// flash_attention.cu's (online softmax; P recomputed from the log-sum-exp; dS = P ⊙ (dPd ⊙ M/(1-p) - D);
// dv = Pd^T dout, dk = s dS^T q in one pass a key tile, dq = s dS k in one a query tile; no T x T matrix in
// memory, no atomics), with every product on FP32 FMAs: P and dS stay FP32, as the CPU keeps them.
//
// A block owns a tile of 32 rows of one head (query rows in the forward and the dq pass, key rows in the
// dk/dv pass) and walks the other side's tiles of 32 up to the causal diagonal. Its tiles are in shared
// memory as FP32, read from any format in 16-byte packs where the layout allows (zeros past T and past
// the head size, which is padded to W = 16 kCols columns). 128 threads: lane group g (16 lanes of a
// half-warp) holds rows 4g..4g+3 of the block's tile, and lane l of the group
//   - the scores of those rows with keys l and l+16 of the current tile (S = q k^T as a 4 x 2 outer
//     product, four columns a step: 6 shared reads of 4 floats to 32 FMAs), whose row max and sum are
//     butterflies within the group;
//   - kCols output columns in runs of 4 adjacent ones (2 at W = 32), the group's 16 lanes reading a row's
//     run together, accumulated from P or dS, which go through a 32 x 36 shared tile between the two
//     products and are read 4 weights at a time.
// Rows of the tiles are 16-byte aligned, 4 floats longer than a multiple of 32, so the 8 rows of a
// shared-memory phase of 4-float reads fall in distinct banks; the order of every sum is that of a
// plain loop over the head's columns or the tile's rows.
// Each output is written once, by the block owning its row, in a fixed order: bitwise reproducible. The
// outputs leave through shared memory (a tile the block no longer reads) as 16-byte packs, as
// FlashAttention-2 stages them. The same pass as dq, without the dq products, gives D = rowsum(Pd ⊙ dPd)
// where the output is stored only as E4M3 (fp8 recipes) at head sizes the tensor-core kernels do not take.
// Slower than tensor cores by the ratio of FP32 to BF16 peaks; much faster than the scalar kernels, which
// reread every key row from global memory a query row at a time.
#include "kernels/flash_attention.h"
#include "kernels/flash_attention_params.h"

#include "common/block_reduce.cuh"
#include "common/cuda_check.h"
#include "common/launch.cuh"
#include "common/tensor_access.cuh"
#include "common/unroll.cuh"
#include "common/vector_access.cuh"

#include <algorithm>
#include <cmath>
#include <type_traits>

namespace gpt::cuda {
namespace {

constexpr int kTile = 32;           // rows of every tile: queries and keys alike
constexpr int kThreads = 128;       // 8 lane groups of 16
constexpr int kGroupLanes = 16;
constexpr int kRowsPerThread = kTile / (kThreads / kGroupLanes);  // 4
constexpr int kKeysPerLane = kTile / kGroupLanes;                  // 2
constexpr int kScoreStride = kTile + 4;  // rows of P, Pd, dS: 16-byte aligned for 4-float reads

template <int kCols>
struct TiledLayout {
  static constexpr int kWidth = kGroupLanes * kCols;  // the head size padded with zero columns
  // Rows 16-byte aligned for 4-float reads; 4 floats past a multiple of 32, so the rows of 8 lanes'
  // 4-float reads (a shared-memory phase) cover the 32 banks once.
  static constexpr int kStride = kWidth + 4;
  // A lane's output columns: kCols / kVec runs of kVec adjacent ones, run m of lane l at column
  // m * 16 kVec + l kVec, so a half-warp reads a row's run of 16 kVec columns in one sweep.
  static constexpr int kVec = kCols < 4 ? kCols : 4;
  static constexpr int kRuns = kCols / kVec;
  static constexpr size_t tile_bytes() { return size_t{kTile} * kStride * sizeof(float); }
  static constexpr size_t score_bytes() { return size_t{kTile} * kScoreStride * sizeof(float); }
  static constexpr size_t forward_bytes() { return 3 * tile_bytes() + score_bytes(); }
  static constexpr size_t dq_bytes() { return 4 * tile_bytes() + score_bytes(); }
  static constexpr size_t dkv_bytes() { return 4 * tile_bytes() + 2 * score_bytes() + 2 * kTile * sizeof(float); }
};

// N = 2 or 4 adjacent floats of shared memory (8- or 16-byte aligned) in one access.
template <int N>
__device__ __forceinline__ void load_floats(const float* p, float (&v)[N]) {
  if constexpr (N == 4) {
    const float4 x = load_vector<float4>(p);
    v[0] = x.x, v[1] = x.y, v[2] = x.z, v[3] = x.w;
  } else {
    const float2 x = load_vector<float2>(p);
    v[0] = x.x, v[1] = x.y;
  }
}
template <int N>
__device__ __forceinline__ void store_floats(float* p, const float (&v)[N]) {
  if constexpr (N == 4)
    store_vector(p, make_float4(v[0], v[1], v[2], v[3]));
  else
    store_vector(p, make_float2(v[0], v[1]));
}

// Where a head's rows are in a [B,T,*] tensor: element first + t * stride + c of row t, column c.
struct HeadRows {
  int64_t first, stride;
};
__device__ __forceinline__ HeadRows qkv_rows(const FlashParams& p, int64_t b, int64_t h, int part) {
  return {b * p.T * 3 * p.C + part * p.C + h * p.head_size, 3 * p.C};
}
__device__ __forceinline__ HeadRows out_rows(const FlashParams& p, int64_t b, int64_t h) {
  return {b * p.T * p.C + h * p.head_size, p.C};
}

// tile[r][c] = x[row t0 + r][c] as FP32, zero past T and past the head size.
template <int kCols>
__device__ void load_tile(float* tile, const TensorRef& x, HeadRows rows, int64_t t0, int64_t T, int hs, bool vector) {
  using L = TiledLayout<kCols>;
  constexpr int kPacks = L::kWidth / kPack;
  for (int i = threadIdx.x; i < kTile * kPacks; i += kThreads) {
    const int r = i / kPacks, c0 = i % kPacks * kPack, count = hs - c0;
    float v[kPack] = {};
    if (t0 + r < T && count > 0) load_values(x, rows.first + (t0 + r) * rows.stride + c0, std::min(count, int{kPack}), vector, v);
    store_vector(tile + r * L::kStride + c0, make_float4(v[0], v[1], v[2], v[3]));
    store_vector(tile + r * L::kStride + c0 + 4, make_float4(v[4], v[5], v[6], v[7]));
  }
}

// x[row t0 + r][c] = tile[r][c] * scale for the rows before T and the columns of the head.
template <int kCols>
__device__ void store_tile(const float* tile, const TensorRef& x, HeadRows rows, int64_t t0, int64_t T, int hs,
                           bool vector, float scale) {
  using L = TiledLayout<kCols>;
  constexpr int kPacks = L::kWidth / kPack;
  for (int i = threadIdx.x; i < kTile * kPacks; i += kThreads) {
    const int r = i / kPacks, c0 = i % kPacks * kPack, count = hs - c0;
    if (t0 + r >= T || count <= 0) continue;
    float v[kPack];
    GPT_UNROLL
    for (int k = 0; k < kPack; ++k) v[k] = tile[r * L::kStride + c0 + k] * scale;
    store_values(x, rows.first + (t0 + r) * rows.stride + c0, std::min(count, int{kPack}), vector, v);
  }
}

// acc[i][j] += sum over c < hs of a[4g+i][c] b[l+16j][c]: the 4 x 2 scores (or dPd) of this lane, four
// columns a step (6 reads of 4 floats to 32 FMAs; the columns past hs are zeros in both tiles).
template <int kCols>
__device__ __forceinline__ void row_dots(const float* a, const float* b, int hs, float (&acc)[kRowsPerThread][kKeysPerLane]) {
  using L = TiledLayout<kCols>;
  const int g = threadIdx.x / kGroupLanes, l = threadIdx.x % kGroupLanes;
  const float* a_rows = a + g * kRowsPerThread * L::kStride;
  const float* b_rows = b + l * L::kStride;
  const int columns = (hs + 3) & ~3;
GPT_UNROLL_BY(2)
  for (int c = 0; c < columns; c += 4) {
    float x[kRowsPerThread][4], y[kKeysPerLane][4];
    GPT_UNROLL
    for (int i = 0; i < kRowsPerThread; ++i) load_floats(a_rows + i * L::kStride + c, x[i]);
    GPT_UNROLL
    for (int j = 0; j < kKeysPerLane; ++j) load_floats(b_rows + j * kGroupLanes * L::kStride + c, y[j]);
    GPT_UNROLL
    for (int e = 0; e < 4; ++e)
      GPT_UNROLL
      for (int i = 0; i < kRowsPerThread; ++i)
        GPT_UNROLL
        for (int j = 0; j < kKeysPerLane; ++j) acc[i][j] = fmaf(x[i][e], y[j][e], acc[i][j]);
  }
}

// acc[i][m kVec + e] += sum over r < n of w[r][4g+i] (transposed) or w[4g+i][r] times x[r][column m, e]:
// this lane's columns of a product of a 32 x 32 shared tile w (P, Pd or dS) with a tile x, four r a step
// (the rows from n to the next multiple of 4 add zeros: w is 0 there).
template <int kCols, bool kTransposed>
__device__ __forceinline__ void accumulate_product(const float* w, const float* x, int n,
                                                   float (&acc)[kRowsPerThread][kCols]) {
  using L = TiledLayout<kCols>;
  const int g = threadIdx.x / kGroupLanes, l = threadIdx.x % kGroupLanes;
  const int rows = (n + 3) & ~3;
  for (int r0 = 0; r0 < rows; r0 += 4) {
    float a[kRowsPerThread][4];  // a[i][e]: the weight of row r0 + e for this lane's row i
    if constexpr (kTransposed) {
      GPT_UNROLL
      for (int e = 0; e < 4; ++e) {
        float column[kRowsPerThread];
        load_floats(w + (r0 + e) * kScoreStride + g * kRowsPerThread, column);
        GPT_UNROLL
        for (int i = 0; i < kRowsPerThread; ++i) a[i][e] = column[i];
      }
    } else {
      GPT_UNROLL
      for (int i = 0; i < kRowsPerThread; ++i) load_floats(w + (g * kRowsPerThread + i) * kScoreStride + r0, a[i]);
    }
    GPT_UNROLL
    for (int e = 0; e < 4; ++e)
      GPT_UNROLL
      for (int m = 0; m < L::kRuns; ++m) {
        float y[L::kVec];
        load_floats(x + (r0 + e) * L::kStride + (m * kGroupLanes + l) * L::kVec, y);
        GPT_UNROLL
        for (int v = 0; v < L::kVec; ++v)
          GPT_UNROLL
          for (int i = 0; i < kRowsPerThread; ++i)
            acc[i][m * L::kVec + v] = fmaf(a[i][e], y[v], acc[i][m * L::kVec + v]);
      }
  }
}

// tile[4g+i][column m, e] = acc[i][m kVec + e] * factor[i]: a lane's accumulators into a shared tile for
// store_tile.
template <int kCols>
__device__ __forceinline__ void stage(float* tile, const float (&acc)[kRowsPerThread][kCols],
                                      const float (&factor)[kRowsPerThread]) {
  using L = TiledLayout<kCols>;
  const int g = threadIdx.x / kGroupLanes, l = threadIdx.x % kGroupLanes;
  GPT_UNROLL
  for (int i = 0; i < kRowsPerThread; ++i)
    GPT_UNROLL
    for (int m = 0; m < L::kRuns; ++m) {
      float v[L::kVec];
      GPT_UNROLL
      for (int e = 0; e < L::kVec; ++e) v[e] = acc[i][m * L::kVec + e] * factor[i];
      store_floats(tile + (g * kRowsPerThread + i) * L::kStride + (m * kGroupLanes + l) * L::kVec, v);
    }
}

__device__ __forceinline__ float dropout_factor(const FlashParams& p, int64_t bh, int64_t t, int64_t key) {
  return p.dropout.active ? p.dropout.factor(attention_mask_element(bh, p.T, t, key)) : 1.0f;
}

// The backward's recompute of this lane's 4 x 2 block of scores s (rows 4g+i of the query tile at q0, keys
// l+16j of the key tile at k0): P = e^(scale s - lse) and the dropout factor f, both 0 where the key
// follows the query or the query is past T; body(i, j, row, key, P, f), row and key within their tiles.
template <class Lse, class Body>
__device__ __forceinline__ void recompute_probabilities(const FlashParams& p, int64_t bh, int64_t q0, int64_t k0,
                                                        const float (&s)[kRowsPerThread][kKeysPerLane], Lse&& lse,
                                                        Body&& body) {
  const int g = threadIdx.x / kGroupLanes, l = threadIdx.x % kGroupLanes;
  GPT_UNROLL
  for (int i = 0; i < kRowsPerThread; ++i) {
    const int row = g * kRowsPerThread + i;
    const int64_t t = q0 + row;
    GPT_UNROLL
    for (int j = 0; j < kKeysPerLane; ++j) {
      const int key = l + j * kGroupLanes;
      const bool causal = k0 + key <= t && t < p.T;
      const float prob = causal ? expf(p.scale * s[i][j] - lse(i)) : 0.0f;
      const float f = causal ? dropout_factor(p, bh, t, k0 + key) : 0.0f;
      body(i, j, row, key, prob, f);
    }
  }
}

// At least 4 blocks a multiprocessor (128 registers a thread), 3 with 8 columns a lane (168), whose tiles
// hold the blocks to 2-4 a multiprocessor in any case (55-77 KiB of shared memory): with the thread count
// alone ptxas (CUDA 13) held five of the kernels to 56-80 registers and spilled.
constexpr int min_blocks(int columns) { return columns >= 8 ? 3 : 4; }

// Query tiles from the last: the rows with the most keys start first, so the grid's tail is short.
__device__ __forceinline__ int64_t query_tile_start() {
  return (static_cast<int64_t>(gridDim.x) - 1 - blockIdx.x) * kTile;
}

template <int kCols>
__global__ void __launch_bounds__(kThreads, min_blocks(kCols)) tiled_forward_kernel(FlashParams p, bool vector) {
  using L = TiledLayout<kCols>;
  const TensorRef qkv{const_cast<void*>(p.qkv), p.dtype, nullptr}, out{p.out, p.dtype, nullptr};
  const int64_t bh = blockIdx.y, b = bh / p.heads, h = bh % p.heads, q0 = query_tile_start();
  const int64_t q_end = std::min(p.T, q0 + kTile);
  const int hs = static_cast<int>(p.head_size), g = threadIdx.x / kGroupLanes, l = threadIdx.x % kGroupLanes;
  float* sq = dynamic_shared_memory<float>();
  float* sk = sq + kTile * L::kStride;
  float* sv = sk + kTile * L::kStride;
  float* sp = sv + kTile * L::kStride;  // [kTile][kScoreStride]: Pd of the current key tile
  load_tile<kCols>(sq, qkv, qkv_rows(p, b, h, 0), q0, p.T, hs, vector);
  float m[kRowsPerThread], sum[kRowsPerThread], o[kRowsPerThread][kCols] = {};
  GPT_UNROLL
  for (int i = 0; i < kRowsPerThread; ++i) m[i] = -INFINITY, sum[i] = 0.0f;
  for (int64_t k0 = 0; k0 < q_end; k0 += kTile) {
    __syncthreads();  // q is in; every thread is done with the previous K, V and P
    load_tile<kCols>(sk, qkv, qkv_rows(p, b, h, 1), k0, p.T, hs, vector);
    load_tile<kCols>(sv, qkv, qkv_rows(p, b, h, 2), k0, p.T, hs, vector);
    __syncthreads();
    float s[kRowsPerThread][kKeysPerLane] = {};
    row_dots<kCols>(sq, sk, hs, s);
    GPT_UNROLL
    for (int i = 0; i < kRowsPerThread; ++i) {
      const int64_t t = q0 + g * kRowsPerThread + i;
      float tile_max = -INFINITY;
      GPT_UNROLL
      for (int j = 0; j < kKeysPerLane; ++j) {
        const int64_t key = k0 + l + j * kGroupLanes;
        s[i][j] = key <= t && t < p.T ? s[i][j] * p.scale : -INFINITY;
        tile_max = nan_max(tile_max, s[i][j]);
      }
      const float m_new = nan_max(m[i], group_max(tile_max, kGroupLanes));
      // A row with no key yet (a padding row past T) keeps its zeros.
      const bool empty = m_new == -INFINITY;
      const float correction = empty ? 1.0f : expf(m[i] - m_new);
      float e[kKeysPerLane], row_sum = 0.0f;
      GPT_UNROLL
      for (int j = 0; j < kKeysPerLane; ++j) {
        e[j] = empty ? 0.0f : expf(s[i][j] - m_new);
        row_sum += e[j];
      }
      sum[i] = sum[i] * correction + group_sum(row_sum, kGroupLanes);
      m[i] = m_new;
      GPT_UNROLL
      for (int jj = 0; jj < kCols; ++jj) o[i][jj] *= correction;
      GPT_UNROLL
      for (int j = 0; j < kKeysPerLane; ++j) {
        const int key = l + j * kGroupLanes;
        sp[(g * kRowsPerThread + i) * kScoreStride + key] = e[j] == 0.0f ? 0.0f : e[j] * dropout_factor(p, bh, t, k0 + key);
      }
    }
    __syncthreads();  // P is in
    accumulate_product<kCols, false>(sp, sv, static_cast<int>(std::min<int64_t>(kTile, q_end - k0)), o);
  }
  // q was last read before the loop's last barrier: its tile takes the output.
  float inv[kRowsPerThread];
  GPT_UNROLL
  for (int i = 0; i < kRowsPerThread; ++i) {
    const int64_t t = q0 + g * kRowsPerThread + i;
    inv[i] = sum[i] > 0.0f ? 1.0f / sum[i] : 0.0f;
    if (l == 0 && t < p.T) p.lse[bh * p.T + t] = m[i] + logf(sum[i]);
  }
  stage<kCols>(sq, o, inv);
  __syncthreads();
  store_tile<kCols>(sq, out, out_rows(p, b, h), q0, p.T, hs, vector, 1.0f);
}

// kDeltaOnly: D = rowsum(Pd ⊙ dPd) into p.delta instead of dq.
template <int kCols, bool kDeltaOnly>
__global__ void __launch_bounds__(kThreads, min_blocks(kCols)) tiled_dq_kernel(FlashBackwardParams p, bool vector) {
  using L = TiledLayout<kCols>;
  const TensorRef qkv{const_cast<void*>(p.qkv), p.dtype, nullptr}, dqkv{p.dqkv, p.dtype, nullptr};
  const TensorRef dout{const_cast<void*>(p.dout), p.dtype, nullptr};
  const int64_t bh = blockIdx.y, b = bh / p.heads, h = bh % p.heads, q0 = query_tile_start();
  const int64_t q_end = std::min(p.T, q0 + kTile);
  const int hs = static_cast<int>(p.head_size), g = threadIdx.x / kGroupLanes, l = threadIdx.x % kGroupLanes;
  float* sq = dynamic_shared_memory<float>();
  float* sdo = sq + kTile * L::kStride;
  float* sk = sdo + kTile * L::kStride;
  float* sv = sk + kTile * L::kStride;
  float* sds = sv + kTile * L::kStride;  // [kTile][kScoreStride]: dS of the current key tile
  load_tile<kCols>(sq, qkv, qkv_rows(p, b, h, 0), q0, p.T, hs, vector);
  load_tile<kCols>(sdo, dout, out_rows(p, b, h), q0, p.T, hs, vector);
  float lse[kRowsPerThread], delta[kRowsPerThread], dq[kRowsPerThread][kCols] = {};
  GPT_UNROLL
  for (int i = 0; i < kRowsPerThread; ++i) {
    const int64_t t = q0 + g * kRowsPerThread + i;
    lse[i] = t < p.T ? p.lse[bh * p.T + t] : 0.0f;
    delta[i] = t < p.T && !kDeltaOnly ? p.delta[bh * p.T + t] : 0.0f;
  }
  for (int64_t k0 = 0; k0 < q_end; k0 += kTile) {
    __syncthreads();  // q and dout are in; every thread is done with the previous K, V and dS
    load_tile<kCols>(sk, qkv, qkv_rows(p, b, h, 1), k0, p.T, hs, vector);
    load_tile<kCols>(sv, qkv, qkv_rows(p, b, h, 2), k0, p.T, hs, vector);
    __syncthreads();
    float s[kRowsPerThread][kKeysPerLane] = {}, dp[kRowsPerThread][kKeysPerLane] = {};
    row_dots<kCols>(sq, sk, hs, s);
    row_dots<kCols>(sdo, sv, hs, dp);
    recompute_probabilities(p, bh, q0, k0, s, [&](int i) { return lse[i]; },
                            [&](int i, int j, int row, int key, float prob, float f) {
                              if constexpr (kDeltaOnly)
                                delta[i] = fmaf(prob * f, dp[i][j], delta[i]);
                              else
                                sds[row * kScoreStride + key] = prob * (dp[i][j] * f - delta[i]);
                            });
    if constexpr (!kDeltaOnly) {
      __syncthreads();  // dS is in
      accumulate_product<kCols, false>(sds, sk, static_cast<int>(std::min<int64_t>(kTile, q_end - k0)), dq);
    }
  }
  if constexpr (kDeltaOnly) {
    GPT_UNROLL
    for (int i = 0; i < kRowsPerThread; ++i) {
      const int64_t t = q0 + g * kRowsPerThread + i;
      const float d = group_sum(delta[i], kGroupLanes);
      if (l == 0 && t < p.T) p.delta[bh * p.T + t] = d;
    }
  } else {
    // q was last read before the loop's last barrier: its tile takes dq.
    float ones[kRowsPerThread];
    GPT_UNROLL
    for (float& one : ones) one = 1.0f;
    stage<kCols>(sq, dq, ones);
    __syncthreads();
    store_tile<kCols>(sq, dqkv, qkv_rows(p, b, h, 0), q0, p.T, hs, vector, p.scale);
  }
}

template <int kCols>
__global__ void __launch_bounds__(kThreads, min_blocks(kCols)) tiled_dkv_kernel(FlashBackwardParams p, bool vector) {
  using L = TiledLayout<kCols>;
  const TensorRef qkv{const_cast<void*>(p.qkv), p.dtype, nullptr}, dqkv{p.dqkv, p.dtype, nullptr};
  const TensorRef dout{const_cast<void*>(p.dout), p.dtype, nullptr};
  // Key tiles in order: the first have the most query rows after them and start first.
  const int64_t bh = blockIdx.y, b = bh / p.heads, h = bh % p.heads, k0 = blockIdx.x * int64_t{kTile};
  const int hs = static_cast<int>(p.head_size), g = threadIdx.x / kGroupLanes;
  float* sk = dynamic_shared_memory<float>();
  float* sv = sk + kTile * L::kStride;
  float* sq = sv + kTile * L::kStride;
  float* sdo = sq + kTile * L::kStride;
  float* spd = sdo + kTile * L::kStride;     // [kTile][kScoreStride]: Pd of the current query tile
  float* sds = spd + kTile * kScoreStride;   // and its dS
  float* slse = sds + kTile * kScoreStride;  // [kTile]
  float* sdelta = slse + kTile;              // [kTile]
  load_tile<kCols>(sk, qkv, qkv_rows(p, b, h, 1), k0, p.T, hs, vector);
  load_tile<kCols>(sv, qkv, qkv_rows(p, b, h, 2), k0, p.T, hs, vector);
  float dk[kRowsPerThread][kCols] = {}, dv[kRowsPerThread][kCols] = {};
  // Query tiles from the diagonal one (tiles of queries and keys have the same rows) to the last.
  for (int64_t q0 = k0; q0 < p.T; q0 += kTile) {
    __syncthreads();  // k and v are in; every thread is done with the previous q, dout, Pd and dS
    load_tile<kCols>(sq, qkv, qkv_rows(p, b, h, 0), q0, p.T, hs, vector);
    load_tile<kCols>(sdo, dout, out_rows(p, b, h), q0, p.T, hs, vector);
    if (threadIdx.x < kTile) {
      const int64_t t = q0 + threadIdx.x;
      slse[threadIdx.x] = t < p.T ? p.lse[bh * p.T + t] : 0.0f;
      sdelta[threadIdx.x] = t < p.T ? p.delta[bh * p.T + t] : 0.0f;
    }
    __syncthreads();
    // Rows 4g+i of the query tile against keys l and l+16 of this block's.
    float s[kRowsPerThread][kKeysPerLane] = {}, dp[kRowsPerThread][kKeysPerLane] = {};
    row_dots<kCols>(sq, sk, hs, s);
    row_dots<kCols>(sdo, sv, hs, dp);
    recompute_probabilities(p, bh, q0, k0, s, [&](int i) { return slse[g * kRowsPerThread + i]; },
                            [&](int i, int j, int row, int key, float prob, float f) {
                              spd[row * kScoreStride + key] = prob * f;
                              sds[row * kScoreStride + key] = prob * (dp[i][j] * f - sdelta[row]);
                            });
    __syncthreads();  // Pd and dS are in
    // Keys 4g+i of this block: dv += Pd^T dout, dk += dS^T q.
    const int n = static_cast<int>(std::min<int64_t>(kTile, p.T - q0));
    accumulate_product<kCols, true>(spd, sdo, n, dv);
    accumulate_product<kCols, true>(sds, sq, n, dk);
  }
  // k and v were last read before the loop's last barrier: their tiles take dk and dv.
  float ones[kRowsPerThread];
  GPT_UNROLL
  for (float& one : ones) one = 1.0f;
  stage<kCols>(sk, dk, ones);
  stage<kCols>(sv, dv, ones);
  __syncthreads();
  store_tile<kCols>(sk, dqkv, qkv_rows(p, b, h, 1), k0, p.T, hs, vector, p.scale);
  store_tile<kCols>(sv, dqkv, qkv_rows(p, b, h, 2), k0, p.T, hs, vector, 1.0f);
}

template <auto Kernel, class Params>
void launch_tiled(size_t shared_bytes, const Params& p, bool vector, cudaStream_t stream) {
  launch_with_shared<Kernel>(fused_attention_grid(p, kTile), dim3(kThreads), shared_bytes, stream, p, vector);
}

// 16-byte packs where every row of every head starts at a multiple of kPack elements of an aligned tensor.
bool packs_fit(const FlashParams& p, std::initializer_list<const void*> tensors) {
  bool fit = p.head_size % kPack == 0 && p.C % kPack == 0;
  for (const void* t : tensors) fit = fit && pack_aligned(t, p.dtype);
  return fit;
}

enum class TiledPass { Forward, Backward, Delta };

template <int kCols>
void run_tiled(TiledPass pass, const FlashBackwardParams& p, cudaStream_t stream) {
  using L = TiledLayout<kCols>;
  switch (pass) {
    case TiledPass::Forward:
      launch_tiled<tiled_forward_kernel<kCols>>(L::forward_bytes(), static_cast<const FlashParams&>(p),
                                                packs_fit(p, {p.qkv, p.out}), stream);
      return;
    case TiledPass::Backward: {
      const bool vector = packs_fit(p, {p.qkv, p.dout, p.dqkv});
      launch_tiled<tiled_dq_kernel<kCols, false>>(L::dq_bytes(), p, vector, stream);
      launch_tiled<tiled_dkv_kernel<kCols>>(L::dkv_bytes(), p, vector, stream);
      return;
    }
    case TiledPass::Delta:
      launch_tiled<tiled_dq_kernel<kCols, true>>(L::dq_bytes(), p, packs_fit(p, {p.qkv, p.dout}), stream);
      return;
  }
}

// The one switch from head size to the kernels' column count: run(std::integral_constant<int, kCols>).
template <class Run>
auto with_tiled_columns(int64_t head_size, Run&& run) {
  GPT_CHECK(head_size <= kMaxTiledHeadSize, "the tiled attention kernels take head sizes up to {}, not {}",
            kMaxTiledHeadSize, head_size);
  if (head_size <= 32) return run(std::integral_constant<int, 2>{});
  if (head_size <= 64) return run(std::integral_constant<int, 4>{});
  return run(std::integral_constant<int, 8>{});
}

void with_tiled_kernels(TiledPass pass, const FlashBackwardParams& p, cudaStream_t stream) {
  with_tiled_columns(p.head_size, [&](auto cols) { run_tiled<decltype(cols)::value>(pass, p, stream); });
}

}  // namespace

bool tiled_attention_fits(int64_t head_size, size_t shared_per_block_optin) {
  if (head_size > kMaxTiledHeadSize) return false;
  const size_t largest = with_tiled_columns(head_size, [](auto cols) {
    using L = TiledLayout<decltype(cols)::value>;
    return std::max({L::forward_bytes(), L::dq_bytes(), L::dkv_bytes()});
  });
  return largest <= shared_per_block_optin;
}

void tiled_flash_forward(const FlashParams& p, cudaStream_t stream) {
  FlashBackwardParams forward;
  static_cast<FlashParams&>(forward) = p;
  with_tiled_kernels(TiledPass::Forward, forward, stream);
}

void tiled_flash_backward(const FlashBackwardParams& p, cudaStream_t stream) {
  with_tiled_kernels(TiledPass::Backward, p, stream);
}

void tiled_attention_delta_from_probabilities(const FlashBackwardParams& p, cudaStream_t stream) {
  with_tiled_kernels(TiledPass::Delta, p, stream);
}

}  // namespace gpt::cuda
