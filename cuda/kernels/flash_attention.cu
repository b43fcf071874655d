// Causal multi-head self-attention, fused in the manner of FlashAttention-2 (Dao, 2023): the scores and
// probabilities live in registers a tile at a time, never in memory, so attention's activation memory is
// O(T) per head: the output and each query row's log-sum-exp.
//
// Layout: qkv [B,T,3C] with q, k, v of head h in columns h*hs, C + h*hs, 2C + h*hs (row stride 3C);
// out, dout [B,T,C]; lse, delta [B,NH,T] F32. For each (b, h), s = 1/sqrt(hs), M the dropout mask at flat
// element ((b*NH + h)*T + t)*T + t2 (core/philox.h, the CPU's rule and index, so the masks agree bit for bit):
//   forward:  per query block, over key tiles j <= the diagonal, online softmax in FP32:
//               S = s q k_j^T;  m' = max(m, rowmax S);  l = l e^(m-m') + rowsum e^(S-m');
//               o = o e^(m-m') + (e^(S-m') ⊙ M/(1-p)) v_j
//             out = o / l (rounded once to the compute format);  lse = m + log l
//   backward: P = e^(s q k^T - lse) recomputed from lse;  D = rowsum(dout ⊙ out)  (the delta kernel; for
//             an output stored only in E4M3, rowsum(Pd ⊙ dPd) by the dq pass without its product)
//             dPd = dout v^T;  dS = P ⊙ (dPd ⊙ M/(1-p) - D)
//             dv = (P ⊙ M/(1-p))^T dout;  dk = s dS^T q   one block per key block, over the query tiles
//             dq = s dS k                                  one block per query block, over the key tiles
//   (D = rowsum(Pd ⊙ dPd), as the CPU's softmax backward has it, since out = Pd v.)
// Every output element is written once by the one block that owns its row, summing in a fixed order: no
// atomics, so results are bitwise reproducible run to run, which the recompute and resume equivalences
// rely on. dq has its own pass, recomputing S and dPd, instead of FlashAttention-2's atomic adds.
//
// Tensor cores: mma.m16n8k16 with FP32 accumulators through common/mma.cuh, operands by ldmatrix from
// shared memory filled by cp.async (16-byte chunks; rows past T arrive as zeros). A block is 4 warps,
// each owning 16 rows of the block's 64 (queries in the forward and the dq pass, keys in the dk/dv
// pass). The forward walks key tiles of 64 with the V tile loading while S and the softmax are computed
// and the next K tile while P v is, as FlashAttention-2 does. The backward passes keep two stages of the
// tiles they walk (K and V in the dq pass; q, dout, lse and D in the dk/dv pass): tile j+1 loads into one
// while tile j is computed from the other, with one barrier a tile.
// P and dS enter their products rounded to the compute format (the accumulators, the softmax statistics
// and D stay FP32), as FlashAttention does. The C fragment of S is the A fragment of P (PTX ISA's layouts:
// thread (g, t) holds rows g and g+8, columns 2t and 2t+1 of each 8-column tile), so P never leaves the
// registers. Rows of shared tiles are padded by 16 bytes so ldmatrix's eight row addresses fall in
// different banks. Tiles per head size (FlashAttention-2 uses 128 x 64 to 128 x 128 on A100/H100; 64-row
// blocks keep the backward's accumulators, dk and dv of 16 x hs per warp, within the registers):
//   hs 64:  forward 64 x 64, backward inner tiles of 64;   hs 128: forward 64 x 64, backward inner 32.
// FP32 and other head sizes go to flash_attention_tiled.cu (up to 128) and flash_attention_scalar.cu
// (past that), which have the same semantics on FP32 FMAs.
#include "kernels/flash_attention.h"

#include "common/cuda_check.h"
#include "common/launch.cuh"
#include "common/mma.cuh"
#include "common/tensor_access.cuh"
#include "common/unroll.cuh"
#include "kernels/flash_attention_params.h"

#include <cmath>

namespace gpt::cuda {
namespace {

constexpr int kThreads = 128;    // 4 warps
constexpr int kBlockRows = 64;   // 16 rows per warp
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

template <int kHead>
struct Tiles {
  static_assert(kHead == 64 || kHead == 128, "the tensor-core attention kernels take head sizes 64 and 128");
  static constexpr int kStride = kHead + 8;             // shared row, 16-bit elements
  static constexpr int kSteps = kHead / 16;             // k-steps over the head dimension
  static constexpr int kHeadTiles = kHead / 8;          // 8-column accumulator tiles over the head dimension
  static constexpr int kInner = kHead == 64 ? 64 : 32;  // the backward's tiles of the other side
  static constexpr size_t tile_bytes(int rows) { return static_cast<size_t>(rows) * kStride * 2; }
  static constexpr size_t forward_bytes() { return 3 * tile_bytes(kBlockRows); }
  // The backward's two stages of inner tiles: the dq pass's K and V, the dk/dv pass's q, dout, lse and D.
  static constexpr size_t dq_stage_bytes() { return 2 * tile_bytes(kInner); }
  static constexpr size_t dkv_stage_bytes() { return 2 * tile_bytes(kInner) + 2 * kInner * 4; }
  static constexpr size_t dq_bytes() { return 2 * tile_bytes(kBlockRows) + 2 * dq_stage_bytes(); }
  static constexpr size_t dkv_bytes() { return 2 * tile_bytes(kBlockRows) + 2 * dkv_stage_bytes(); }
};
static_assert(Tiles<64>::tile_bytes(1) % 16 == 0 && Tiles<64>::dkv_stage_bytes() % 16 == 0 &&
                  Tiles<128>::tile_bytes(1) % 16 == 0 && Tiles<128>::dkv_stage_bytes() % 16 == 0,
              "ldmatrix and cp.async take 16-byte aligned rows in every stage");

// Rows [row0, row0 + rows) of one head's [T, kHead] slice (element stride ld between rows) into a shared
// tile; rows at or past T are zero-filled (cp.async with 0 source bytes, from a row that exists).
template <int kHead, int kRows>
__device__ __forceinline__ void load_tile(uint16_t* tile, const uint16_t* head, int64_t ld, int64_t row0, int64_t T) {
  constexpr int kChunks = kHead / 8;
  for (int c = threadIdx.x; c < kRows * kChunks; c += kThreads) {
    const int r = c / kChunks, col = c % kChunks * 8;
    const int64_t t = row0 + r;
    const bool live = t < T;
    cp_async<16>(tile + r * Tiles<kHead>::kStride + col, head + (live ? t : T - 1) * ld + col, live ? 16 : 0);
  }
}

template <MmaInput kIn>
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
  if constexpr (kIn == MmaInput::kBf16)
    return static_cast<uint32_t>(f32_to_bf16(lo)) | static_cast<uint32_t>(f32_to_bf16(hi)) << 16;
  else
    return static_cast<uint32_t>(f32_to_f16(lo)) | static_cast<uint32_t>(f32_to_f16(hi)) << 16;
}

template <MmaInput kIn>
__device__ __forceinline__ void mma_pair(float (&d0)[4], float (&d1)[4], const uint32_t (&a)[4], const uint32_t (&b)[4]) {
  const uint32_t b0[2] = {b[0], b[1]}, b1[2] = {b[2], b[3]};
  mma_m16n8k16<kIn>(d0, a, b0, d0);
  mma_m16n8k16<kIn>(d1, a, b1, d1);
}

// The A fragment of k-step kk from two 8-column C fragments (columns 16kk..16kk+15 of a 16-row tile).
template <MmaInput kIn>
__device__ __forceinline__ void a_from_c(uint32_t (&a)[4], const float (&lo)[4], const float (&hi)[4]) {
  a[0] = pack2<kIn>(lo[0], lo[1]);
  a[1] = pack2<kIn>(lo[2], lo[3]);
  a[2] = pack2<kIn>(hi[0], hi[1]);
  a[3] = pack2<kIn>(hi[2], hi[3]);
}

// ldmatrix addresses (lane l of the warp), for a tile with row stride kStride:
//   A of rows r0..r0+15, k-step ks:                        row r0 + l%16, column 16ks + 8(l/16)
//   B of 8-row tiles n, n+1 (rows are the n index), k-step ks: row 8n + 8(l/16) + l%8, column 16ks + 8((l/8)%2)
//   B transposed, k rows 16kk.., 8-column tiles d, d+1:     row 16kk + 8((l/8)%2) + l%8, column 8(d + l/16)
template <int kStride>
__device__ __forceinline__ const uint16_t* a_rows(const uint16_t* tile, int r0, int ks, int lane) {
  return tile + (r0 + lane % 16) * kStride + ks * 16 + 8 * (lane / 16);
}
template <int kStride>
__device__ __forceinline__ const uint16_t* b_rows(const uint16_t* tile, int n, int ks, int lane) {
  return tile + (8 * n + 8 * (lane / 16) + lane % 8) * kStride + ks * 16 + 8 * ((lane / 8) % 2);
}
template <int kStride>
__device__ __forceinline__ const uint16_t* b_trans(const uint16_t* tile, int kk, int d, int lane) {
  return tile + (16 * kk + 8 * ((lane / 8) % 2) + lane % 8) * kStride + 8 * (d + lane / 16);
}

// acc[n] += A(16 rows of `a_tile` from row r0) x B(rows n of `b_tile`)^T over the head dimension: S = q k^T
// and dPd = dout v^T (and their transposes in the dk/dv pass).
template <int kHead, MmaInput kIn, int kN>
__device__ __forceinline__ void product_over_head(float (&acc)[kN][4], const uint16_t* a_tile, int r0,
                                                  const uint16_t* b_tile, int lane) {
  constexpr int kS = Tiles<kHead>::kStride;
  GPT_UNROLL
  for (int ks = 0; ks < Tiles<kHead>::kSteps; ++ks) {
    uint32_t a[4];
    ldmatrix<4>(a, a_rows<kS>(a_tile, r0, ks, lane));
    GPT_UNROLL
    for (int n = 0; n < kN; n += 2) {
      uint32_t b[4];
      ldmatrix<4>(b, b_rows<kS>(b_tile, n, ks, lane));
      mma_pair<kIn>(acc[n], acc[n + 1], a, b);
    }
  }
}

// acc[d] += X (16 rows, kN*8 columns, C fragments in x) x tile (kN*8 rows, kHead columns): o += P v,
// dq += dS k, dv += Pd^T dout, dk += dS^T q.
template <int kHead, MmaInput kIn, int kN>
__device__ __forceinline__ void product_into_head(float (&acc)[Tiles<kHead>::kHeadTiles][4], const float (&x)[kN][4],
                                                  const uint16_t* tile, int lane) {
  constexpr int kS = Tiles<kHead>::kStride;
  GPT_UNROLL
  for (int kk = 0; kk < kN / 2; ++kk) {
    uint32_t a[4];
    a_from_c<kIn>(a, x[2 * kk], x[2 * kk + 1]);
    GPT_UNROLL
    for (int d = 0; d < Tiles<kHead>::kHeadTiles; d += 2) {
      uint32_t b[4];
      ldmatrix<4, true>(b, b_trans<kS>(tile, kk, d, lane));
      mma_pair<kIn>(acc[d], acc[d + 1], a, b);
    }
  }
}

__device__ __forceinline__ float quad_max(float v) {
  v = fmaxf(v, __shfl_xor_sync(0xFFFFFFFFu, v, 1));
  return fmaxf(v, __shfl_xor_sync(0xFFFFFFFFu, v, 2));
}
__device__ __forceinline__ float quad_sum(float v) {
  v += __shfl_xor_sync(0xFFFFFFFFu, v, 1);
  return v + __shfl_xor_sync(0xFFFFFFFFu, v, 2);
}

// Stores the pair (x0, x1) at elements i, i+1 of a 16-bit tensor (i even, 4-byte aligned).
template <MmaInput kIn>
__device__ __forceinline__ void store_pair(uint16_t* base, int64_t i, float x0, float x1) {
  *reinterpret_cast<uint32_t*>(base + i) = pack2<kIn>(x0, x1);
}

template <int kHead, MmaInput kIn>
__global__ void __launch_bounds__(kThreads) flash_forward_kernel(FlashParams p) {
#if GPT_HAS_SM80_MMA
  using Tl = Tiles<kHead>;
  constexpr int kS = Tl::kStride, kKeyTiles8 = kBlockRows / 8;
  uint16_t* sq = dynamic_shared_memory<uint16_t>();
  uint16_t* sk = sq + kBlockRows * kS;
  uint16_t* sv = sk + kBlockRows * kS;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, tq = lane & 3;
  const int64_t T = p.T, C = p.C, ld = 3 * C;
  const int64_t qb = gridDim.x - 1 - blockIdx.x;  // the longest rows start first
  const int64_t bh = blockIdx.y, b = bh / p.heads, h = bh % p.heads;
  const auto* q_head = static_cast<const uint16_t*>(p.qkv) + b * T * ld + h * kHead;
  const uint16_t* k_head = q_head + C;
  const uint16_t* v_head = q_head + 2 * C;
  const int64_t q0 = qb * kBlockRows;
  const int64_t row[2] = {q0 + warp * 16 + g, q0 + warp * 16 + g + 8};

  load_tile<kHead, kBlockRows>(sq, q_head, ld, q0, T);
  load_tile<kHead, kBlockRows>(sk, k_head, ld, 0, T);
  cp_async_commit();
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
  float o[Tl::kHeadTiles][4] = {};
  for (int64_t j = 0; j <= qb; ++j) {
    const int64_t key0 = j * kBlockRows;
    cp_async_wait<0>();
    __syncthreads();  // K_j is in; every warp is done with V_{j-1}
    load_tile<kHead, kBlockRows>(sv, v_head, ld, key0, T);
    cp_async_commit();
    float s[kKeyTiles8][4] = {};
    product_over_head<kHead, kIn>(s, sq, warp * 16, sk, lane);

    const bool edge = j == qb || key0 + kBlockRows > T;  // the diagonal tile, or keys past T
    GPT_UNROLL
    for (int r = 0; r < 2; ++r) {
      float mx = -INFINITY;
      GPT_UNROLL
      for (int n = 0; n < kKeyTiles8; ++n)
        GPT_UNROLL
        for (int e = 0; e < 2; ++e) {
          float x = s[n][2 * r + e] * p.scale_log2;
          const int64_t key = key0 + n * 8 + 2 * tq + e;
          if (edge && (key > row[r] || key >= T)) x = -INFINITY;
          s[n][2 * r + e] = x;
          mx = fmaxf(mx, x);
        }
      // Key 0 is in every row's first tile, so m_new is finite from the first tile on.
      const float m_new = fmaxf(m[r], quad_max(mx));
      const float correction = exp2f(m[r] - m_new);
      m[r] = m_new;
      l[r] *= correction;
      GPT_UNROLL
      for (int d = 0; d < Tl::kHeadTiles; ++d) {
        o[d][2 * r] *= correction;
        o[d][2 * r + 1] *= correction;
      }
      GPT_UNROLL
      for (int n = 0; n < kKeyTiles8; ++n) {
        const float e0 = exp2f(s[n][2 * r] - m_new), e1 = exp2f(s[n][2 * r + 1] - m_new);
        l[r] += e0 + e1;
        if (p.dropout.active) {
          float f0, f1;
          p.dropout.pair(attention_mask_element(bh, T, row[r], key0 + n * 8 + 2 * tq), f0, f1);
          s[n][2 * r] = e0 * f0;
          s[n][2 * r + 1] = e1 * f1;
        } else {
          s[n][2 * r] = e0;
          s[n][2 * r + 1] = e1;
        }
      }
    }
    cp_async_wait<0>();
    __syncthreads();  // V_j is in; every warp is done with K_j
    if (j < qb) {
      load_tile<kHead, kBlockRows>(sk, k_head, ld, key0 + kBlockRows, T);
      cp_async_commit();
    }
    product_into_head<kHead, kIn>(o, s, sv, lane);
  }

  auto* out = static_cast<uint16_t*>(p.out);
  GPT_UNROLL
  for (int r = 0; r < 2; ++r) {
    const float sum = quad_sum(l[r]);
    if (row[r] >= T) continue;
    const float inv = 1.0f / sum;
    const int64_t base = (b * T + row[r]) * C + h * kHead + 2 * tq;
    GPT_UNROLL
    for (int d = 0; d < Tl::kHeadTiles; ++d) store_pair<kIn>(out, base + d * 8, o[d][2 * r] * inv, o[d][2 * r + 1] * inv);
    if (tq == 0) p.lse[bh * T + row[r]] = (m[r] + log2f(sum)) * kLn2;
  }
#else
  (void)p;
  __trap();  // not launched below compute capability 8.0 (flash_attention_uses_tensor_cores)
#endif
}

// The backward's recompute over one warp's tile, in place: for each element P = 2^(S scale_log2 - lse2), 0
// where the key follows the query (and, in the dq pass, where the key is past T); f = M/(1-p), the dropout
// factor of its (query, key), 1 without dropout; Pd = P f and dS = P (dPd f - D). kKeyRows: the tile's rows
// are keys and its columns queries (the dk/dv pass, S^T and dPd^T), each query's lse2 and D from the
// column arrays (col_lse the natural log-sum-exp as stored, lse2 = col_lse log2(e)); s then holds Pd and dp
// dS. Else the rows are queries (the dq pass), with their lse2 and D in row_lse2_r and row_delta_r; it needs
// dS only, which s holds. Both give P = 0 where the key follows the query or the column is past T (there
// the dk/dv pass's stage holds zeros), and neither stores rows past T.
// Rows and their statistics come as values, not references to the kernels' arrays, and the dq pass keeps
// dS in s: the dq kernel sits at ptxas's 168-register mark, and either change spilled it on sm_80.
template <bool kKeyRows, int kN>
__device__ __forceinline__ void recompute_probabilities(float (&s)[kN][4], float (&dp)[kN][4], float scale_log2,
                                                        const FlashDropout& dropout, int64_t T, int64_t bh,
                                                        int64_t row0, int64_t row1, int64_t col0, int tq, bool edge,
                                                        float row_lse2_0, float row_lse2_1, float row_delta_0,
                                                        float row_delta_1, const float* col_lse,
                                                        const float* col_delta) {
  GPT_UNROLL
  for (int n = 0; n < kN; ++n)
    GPT_UNROLL
    for (int r = 0; r < 2; ++r) {
      const int64_t row = r == 0 ? row0 : row1;
      // Along a query row two neighbouring keys share one Philox draw; along a key row they are two rows.
      float f[2] = {1.0f, 1.0f};
      if constexpr (!kKeyRows)
        if (dropout.active) dropout.pair(attention_mask_element(bh, T, row, col0 + n * 8 + 2 * tq), f[0], f[1]);
      GPT_UNROLL
      for (int e = 0; e < 2; ++e) {
        const int c = n * 8 + 2 * tq + e;
        const int64_t col = col0 + c;
        const float lse2 = kKeyRows ? __fmul_rn(col_lse[c], kLog2e) : (r == 0 ? row_lse2_0 : row_lse2_1);
        const float delta = kKeyRows ? col_delta[c] : (r == 0 ? row_delta_0 : row_delta_1);
        float prob = exp2f(s[n][2 * r + e] * scale_log2 - lse2);
        if constexpr (kKeyRows) {
          if (edge && (col < row || col >= T)) prob = 0.0f;
          f[e] = dropout.active ? dropout.factor(attention_mask_element(bh, T, col, row)) : 1.0f;
          s[n][2 * r + e] = prob * f[e];
          dp[n][2 * r + e] = prob * (dp[n][2 * r + e] * f[e] - delta);
        } else {
          if (edge && (col > row || col >= T)) prob = 0.0f;
          s[n][2 * r + e] = prob * (dp[n][2 * r + e] * f[e] - delta);
        }
      }
    }
}

// dq for one block of 64 query rows, over the key tiles up to its diagonal. kDeltaOnly: instead of dq,
// D = rowsum(Pd ⊙ dPd) into p.delta, for an output the recipe stores only in another format (fp8's
// E4M3): the same two products a tile, the row sums in place of the third.
template <int kHead, MmaInput kIn, bool kDeltaOnly = false>
__global__ void __launch_bounds__(kThreads) flash_backward_dq_kernel(FlashBackwardParams p) {
#if GPT_HAS_SM80_MMA
  using Tl = Tiles<kHead>;
  constexpr int kS = Tl::kStride, kInner = Tl::kInner, kN = kInner / 8;
  uint16_t* sq = dynamic_shared_memory<uint16_t>();
  uint16_t* sdo = sq + kBlockRows * kS;
  // Stage j % 2 holds tile j: its K rows, then its V rows.
  const auto stage = [stages = sdo + kBlockRows * kS](int64_t j) { return stages + (j & 1) * 2 * kInner * kS; };
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, tq = lane & 3;
  const int64_t T = p.T, C = p.C, ld = 3 * C;
  const int64_t qb = gridDim.x - 1 - blockIdx.x;
  const int64_t bh = blockIdx.y, b = bh / p.heads, h = bh % p.heads;
  const auto* q_head = static_cast<const uint16_t*>(p.qkv) + b * T * ld + h * kHead;
  const uint16_t* k_head = q_head + C;
  const uint16_t* v_head = q_head + 2 * C;
  const auto* do_head = static_cast<const uint16_t*>(p.dout) + b * T * C + h * kHead;
  const int64_t q0 = qb * kBlockRows;
  const int64_t row[2] = {q0 + warp * 16 + g, q0 + warp * 16 + g + 8};
  float lse2[2], delta[2];
  GPT_UNROLL
  for (int r = 0; r < 2; ++r) {
    lse2[r] = row[r] < T ? p.lse[bh * T + row[r]] * kLog2e : 0.0f;
    delta[r] = row[r] < T && !kDeltaOnly ? p.delta[bh * T + row[r]] : 0.0f;
  }

  auto load_stage = [&](int64_t j) {
    load_tile<kHead, kInner>(stage(j), k_head, ld, j * kInner, T);
    load_tile<kHead, kInner>(stage(j) + kInner * kS, v_head, ld, j * kInner, T);
    cp_async_commit();
  };
  load_tile<kHead, kBlockRows>(sq, q_head, ld, q0, T);
  load_tile<kHead, kBlockRows>(sdo, do_head, C, q0, T);
  load_stage(0);
  float dq[Tl::kHeadTiles][4] = {};
  const int64_t last = q0 + kBlockRows < T ? q0 + kBlockRows : T;  // one past the block's last row
  const int64_t tiles = (last + kInner - 1) / kInner;
  for (int64_t j = 0; j < tiles; ++j) {
    const int64_t key0 = j * kInner;
    cp_async_wait<0>();
    __syncthreads();  // tile j is in; every warp is done with tile j-1, whose stage tile j+1 now fills
    if (j + 1 < tiles) load_stage(j + 1);
    const uint16_t* sk = stage(j);
    const uint16_t* sv = sk + kInner * kS;
    float s[kN][4] = {}, dp[kN][4] = {};
    product_over_head<kHead, kIn>(s, sq, warp * 16, sk, lane);
    product_over_head<kHead, kIn>(dp, sdo, warp * 16, sv, lane);
    const bool edge = key0 + kInner - 1 > q0 || key0 + kInner > T;
    if constexpr (kDeltaOnly) {
      // This thread's elements of its two rows: columns 2tq, 2tq+1 of each 8-column tile (C fragments).
      GPT_UNROLL
      for (int n = 0; n < kN; ++n)
        GPT_UNROLL
        for (int r = 0; r < 2; ++r) {
          const int64_t col0 = key0 + n * 8 + 2 * tq;
          float f[2] = {1.0f, 1.0f};
          if (p.dropout.active) p.dropout.pair(attention_mask_element(bh, T, row[r], col0), f[0], f[1]);
          GPT_UNROLL
          for (int e = 0; e < 2; ++e) {
            if (edge && (col0 + e > row[r] || col0 + e >= T)) continue;
            const float prob = exp2f(s[n][2 * r + e] * p.scale_log2 - lse2[r]);
            delta[r] = fmaf(prob * f[e], dp[n][2 * r + e], delta[r]);
          }
        }
    } else {
      recompute_probabilities<false>(s, dp, p.scale_log2, p.dropout, T, bh, row[0], row[1], key0, tq, edge, lse2[0],
                                     lse2[1], delta[0], delta[1], nullptr, nullptr);
      product_into_head<kHead, kIn>(dq, s, sk, lane);
    }
  }
  if constexpr (kDeltaOnly) {
    // A row's four threads (tq = 0..3, adjacent lanes) add their sums in a fixed order.
    GPT_UNROLL
    for (int r = 0; r < 2; ++r) {
      float d = delta[r];
      d += __shfl_xor_sync(0xFFFFFFFFu, d, 1);
      d += __shfl_xor_sync(0xFFFFFFFFu, d, 2);
      if (tq == 0 && row[r] < T) p.delta[bh * T + row[r]] = d;
    }
    return;
  }
  auto* dqkv = static_cast<uint16_t*>(p.dqkv);
  GPT_UNROLL
  for (int r = 0; r < 2; ++r) {
    if (row[r] >= T) continue;
    const int64_t base = (b * T + row[r]) * ld + h * kHead + 2 * tq;
    GPT_UNROLL
    for (int d = 0; d < Tl::kHeadTiles; ++d)
      store_pair<kIn>(dqkv, base + d * 8, dq[d][2 * r] * p.scale, dq[d][2 * r + 1] * p.scale);
  }
#else
  (void)p;
  __trap();  // not launched below compute capability 8.0 (flash_attention_uses_tensor_cores)
#endif
}

// dk and dv for one block of 64 keys, over the query tiles from its diagonal to T. Here the products are
// transposed (keys are the rows): S^T = k q^T, dPd^T = v dout^T.
template <int kHead, MmaInput kIn>
__global__ void __launch_bounds__(kThreads) flash_backward_dkv_kernel(FlashBackwardParams p) {
#if GPT_HAS_SM80_MMA
  using Tl = Tiles<kHead>;
  constexpr int kS = Tl::kStride, kInner = Tl::kInner, kN = kInner / 8;
  uint16_t* sk = dynamic_shared_memory<uint16_t>();
  uint16_t* sv = sk + kBlockRows * kS;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, tq = lane & 3;
  const int64_t T = p.T, C = p.C, ld = 3 * C;
  const int64_t kb = blockIdx.x;  // key block 0 has the most query rows: it starts first
  const int64_t bh = blockIdx.y, b = bh / p.heads, h = bh % p.heads;
  const auto* q_head = static_cast<const uint16_t*>(p.qkv) + b * T * ld + h * kHead;
  const uint16_t* k_head = q_head + C;
  const uint16_t* v_head = q_head + 2 * C;
  const auto* do_head = static_cast<const uint16_t*>(p.dout) + b * T * C + h * kHead;
  const int64_t k0 = kb * kBlockRows;
  const int64_t key[2] = {k0 + warp * 16 + g, k0 + warp * 16 + g + 8};

  const int64_t first = k0 / kInner, tiles = (T + kInner - 1) / kInner;
  // Stage (i - first) % 2 holds query tile i: its q rows, its dout rows, then its lse and D.
  const auto stage = [stages = reinterpret_cast<char*>(sv + kBlockRows * kS), first](int64_t i) {
    return reinterpret_cast<uint16_t*>(stages + ((i - first) & 1) * Tl::dkv_stage_bytes());
  };
  // Query rows past T arrive as zeros (lse and D too); recompute_probabilities gives them P = 0.
  auto load_stage = [&](int64_t i) {
    uint16_t* q_tile = stage(i);
    load_tile<kHead, kInner>(q_tile, q_head, ld, i * kInner, T);
    load_tile<kHead, kInner>(q_tile + kInner * kS, do_head, C, i * kInner, T);
    auto* stats = reinterpret_cast<float*>(q_tile + 2 * kInner * kS);
    for (int c = threadIdx.x; c < kInner; c += kThreads) {
      const int64_t q = i * kInner + c;
      const bool live = q < T;
      const int64_t at = bh * T + (live ? q : T - 1);
      cp_async<4>(stats + c, p.lse + at, live ? 4 : 0);
      cp_async<4>(stats + kInner + c, p.delta + at, live ? 4 : 0);
    }
    cp_async_commit();
  };
  load_tile<kHead, kBlockRows>(sk, k_head, ld, k0, T);
  load_tile<kHead, kBlockRows>(sv, v_head, ld, k0, T);
  load_stage(first);
  float dk[Tl::kHeadTiles][4] = {}, dv[Tl::kHeadTiles][4] = {};
  for (int64_t i = first; i < tiles; ++i) {
    const int64_t qt0 = i * kInner;
    cp_async_wait<0>();
    __syncthreads();  // tile i is in; every warp is done with tile i-1, whose stage tile i+1 now fills
    if (i + 1 < tiles) load_stage(i + 1);
    const uint16_t* sq = stage(i);
    const uint16_t* sdo = sq + kInner * kS;
    const auto* slse = reinterpret_cast<const float*>(sdo + kInner * kS);
    float s[kN][4] = {}, dp[kN][4] = {};
    product_over_head<kHead, kIn>(s, sk, warp * 16, sq, lane);
    product_over_head<kHead, kIn>(dp, sv, warp * 16, sdo, lane);
    // Some query of the tile precedes some key of the block, or the tile runs past T.
    const bool edge = qt0 < k0 + kBlockRows - 1 || qt0 + kInner > T;
    recompute_probabilities<true>(s, dp, p.scale_log2, p.dropout, T, bh, key[0], key[1], qt0, tq, edge, 0.0f, 0.0f,
                                  0.0f, 0.0f, slse, slse + kInner);
    product_into_head<kHead, kIn>(dv, s, sdo, lane);
    product_into_head<kHead, kIn>(dk, dp, sq, lane);
  }
  auto* dqkv = static_cast<uint16_t*>(p.dqkv);
  GPT_UNROLL
  for (int r = 0; r < 2; ++r) {
    if (key[r] >= T) continue;
    const int64_t base = (b * T + key[r]) * ld + h * kHead + 2 * tq;
    GPT_UNROLL
    for (int d = 0; d < Tl::kHeadTiles; ++d) {
      store_pair<kIn>(dqkv, base + C + d * 8, dk[d][2 * r] * p.scale, dk[d][2 * r + 1] * p.scale);
      store_pair<kIn>(dqkv, base + 2 * C + d * 8, dv[d][2 * r], dv[d][2 * r + 1]);
    }
  }
#else
  (void)p;
  __trap();  // not launched below compute capability 8.0 (flash_attention_uses_tensor_cores)
#endif
}

template <auto Kernel, class Params>
void launch_blocks(size_t shared_bytes, cudaStream_t stream, const Params& p) {
  launch_with_shared<Kernel>(fused_attention_grid(p, kBlockRows), dim3(kThreads), shared_bytes, stream, p);
}

template <int kHead, MmaInput kIn>
struct TensorCoreForward {
  static void run(const FlashParams& p, cudaStream_t stream) {
    launch_blocks<flash_forward_kernel<kHead, kIn>>(Tiles<kHead>::forward_bytes(), stream, p);
  }
};

template <int kHead, MmaInput kIn>
struct TensorCoreBackward {
  static void run(const FlashBackwardParams& p, cudaStream_t stream) {
    launch_blocks<flash_backward_dq_kernel<kHead, kIn>>(Tiles<kHead>::dq_bytes(), stream, p);
    launch_blocks<flash_backward_dkv_kernel<kHead, kIn>>(Tiles<kHead>::dkv_bytes(), stream, p);
  }
};

template <int kHead, MmaInput kIn>
struct TensorCoreDelta {
  static void run(const FlashBackwardParams& p, cudaStream_t stream) {
    launch_blocks<flash_backward_dq_kernel<kHead, kIn, true>>(Tiles<kHead>::dq_bytes(), stream, p);
  }
};

// The one switch from (format, head size) to the tensor-core kernels' template arguments.
template <template <int, MmaInput> class Run, class Params>
void with_tensor_core_kernel(DType dtype, int64_t head_size, const Params& p, cudaStream_t stream) {
  const bool bf16 = dtype == DType::BF16;
  if (head_size == 64) bf16 ? Run<64, MmaInput::kBf16>::run(p, stream) : Run<64, MmaInput::kF16>::run(p, stream);
  else bf16 ? Run<128, MmaInput::kBf16>::run(p, stream) : Run<128, MmaInput::kF16>::run(p, stream);
}

bool aligned(const void* p, size_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

}  // namespace

bool flash_attention_uses_tensor_cores(DType dtype, int64_t head_size, int compute_capability) {
  return (dtype == DType::BF16 || dtype == DType::F16) && (head_size == 64 || head_size == 128) &&
         compute_capability >= kMinTensorCoreAttentionCapability;
}

void flash_attention_forward(const AttentionForwardArgs& args, const DeviceContext& ctx) {
  const FlashParams p = flash_params(args.qkv, args.out, args.probs, args.n_head, args.dropout, "attention_forward");
  if (p.T == 0 || p.batch_heads == 0) return;
  // 16-byte cp.async chunks of every head's rows: the tensors' starts must be 16-byte aligned (the
  // arenas align every buffer; a view at an odd offset takes the tiled kernels).
  if (flash_attention_uses_tensor_cores(args.qkv.dtype, p.head_size, ctx.compute_capability) && aligned(p.qkv, 16) &&
      aligned(p.out, 4)) {
    with_tensor_core_kernel<TensorCoreForward>(args.qkv.dtype, p.head_size, p, ctx.stream);
    return;
  }
  if (tiled_attention_fits(p.head_size, ctx.shared_per_block_optin))
    tiled_flash_forward(p, ctx.stream);
  else
    scalar_flash_forward(p, ctx.stream);
}

void flash_attention_backward(const AttentionBackwardArgs& args, const DeviceContext& ctx) {
  const FlashBackwardParams p = flash_backward_params(args);
  if (p.T == 0 || p.batch_heads == 0) return;
  const bool tensor_cores = flash_attention_uses_tensor_cores(args.qkv.dtype, p.head_size, ctx.compute_capability) &&
                            aligned(p.qkv, 16) && aligned(p.dout, 16) && aligned(p.dqkv, 4);
  const bool tiled = tiled_attention_fits(p.head_size, ctx.shared_per_block_optin);
  // D from the probabilities on tensor cores where the backward runs there; else attention_delta decides.
  if (!p.out_in_compute_format && tensor_cores)
    with_tensor_core_kernel<TensorCoreDelta>(args.qkv.dtype, p.head_size, p, ctx.stream);
  else
    attention_delta(p, tiled, ctx.stream);
  if (tensor_cores) {
    with_tensor_core_kernel<TensorCoreBackward>(args.qkv.dtype, p.head_size, p, ctx.stream);
    return;
  }
  if (tiled)
    tiled_flash_backward(p, ctx.stream);
  else
    scalar_flash_backward(p, ctx.stream);
}

}  // namespace gpt::cuda
