// Causal multi-head self-attention, materialised (the semantics of src/cpu/attention.cpp): cuBLASLt
// strided-batched products for the four matrix products and two row kernels.
//
// Layout: qkv [B,T,3C] with q, k, v of head h in columns h*hs, C + h*hs, 2C + h*hs (row stride 3C);
// out, dout [B,T,C]; probs, dprobs [B,NH,T,T] F32. For each (b, h), with s = 1/sqrt(hs) and M the dropout
// mask at flat index ((b*NH + h)*T + t)*T + t2 (core/philox.h, the CPU's rule, so the masks agree bit for bit):
//   forward:  S = s q k^T                         batched over the NH heads of sequence b, written into probs
//             P = causal row softmax of S         softmax_forward_kernel, in place (upper triangle stored 0)
//             Pd = P ⊙ M / (1-p)                  dropped_operand_kernel, in the operands' format
//             out = Pd v                          batched over a chunk of heads
//   backward: Pd as forward;  dv = Pd^T dout;  dPd = dout v^T (into dprobs)
//             dS = Pd ⊙ dPd - P rowsum(Pd ⊙ dPd)  softmax_backward_kernel, in place in dprobs, Pd
//                                                  recomputed in FP32 from P and the mask
//             dq = s dS k;  dk = s dS^T q          dqkv overwritten: every element is one product's output
// The heads' views need no permuted copies: head h of q is a [T, hs] matrix with leading dimension 3C at
// column h*hs, so the heads of one sequence are a strided batch with stride hs (B is looped over, since
// sequences are T*3C apart while heads are hs apart).
// The products multiply operands of one format (qkv's: F32, BF16 or F16). P and dS are F32 (as the CPU
// keeps them), so with narrow operands they enter the products split in two, x = hi + lo with
// hi = round(x) and lo = round(x - hi) in the operands' format (hi + lo holds x to about 2^-16 relative,
// where hi alone would be 2^-8: dS's rows sum to zero and the products cancel, so one rounding would show
// as a unit of the terms in the outputs). Each such product is then two tensor-core products summed in
// FP32 in ctx.scratch (lo first, then hi with beta = 1), and a store kernel rounds the sum once into the
// output's strided columns. The copies go to ctx.scratch a chunk of heads at a time (two T x T matrices
// and a T x hs sum per head); with F32 operands there is nothing to split: Pd is P itself (forward
// without dropout) or a copy in the scratch, and the backward keeps Pd, then dS, in dprobs.
// Row kernels: one block per row, FP32 math, fixed-order block reductions (max, then sum), so results are
// bitwise reproducible; the products write every output element once (no atomics anywhere). Rows move as
// 128-bit float4 loads and stores when T is a multiple of 4 and the rows 16-byte aligned (then one
// Philox call gives the mask words of the 4 elements), else one float at a time.
#include "kernels/attention.h"
#include "kernels/flash_attention.h"

#include "backend/op_checks.h"
#include "common/block_reduce.cuh"
#include "common/cuda_check.h"
#include "common/launch.cuh"
#include "common/tensor_access.cuh"
#include "gemm/matmul.h"

#include <algorithm>
#include <cmath>

namespace gpt::cuda {
namespace {

// W consecutive floats of a row: one 128-bit load or store when W = 4 (the row's start 16-byte aligned and
// T a multiple of 4), else one float.
template <int W>
struct Lanes {
  float v[W];
};

template <int W>
__device__ __forceinline__ Lanes<W> load_lanes(const float* p) {
  Lanes<W> l;
  if constexpr (W == 4) {
    const float4 q = *reinterpret_cast<const float4*>(p);
    l.v[0] = q.x, l.v[1] = q.y, l.v[2] = q.z, l.v[3] = q.w;
  } else {
    l.v[0] = *p;
  }
  return l;
}

template <int W>
__device__ __forceinline__ void store_lanes(float* p, const Lanes<W>& l) {
  if constexpr (W == 4) {
    *reinterpret_cast<float4*>(p) = make_float4(l.v[0], l.v[1], l.v[2], l.v[3]);
  } else {
    *p = l.v[0];
  }
}

struct Dropout {
  RngStream stream;
  uint32_t threshold = 0;
  float scale = 1.0f;  // 1 / (1 - p), as the CPU rounds it
  bool active = false;

  // The W elements from flat index first (a multiple of 4 when W = 4: one Philox block holds their words).
  template <int W>
  __device__ __forceinline__ Lanes<W> apply(Lanes<W> x, uint64_t first) const {
    if (!active) return x;
    if constexpr (W == 4) {
      const Philox4 words = stream.block(first >> 2);
      for (int e = 0; e < 4; ++e) x.v[e] = words.v[e] >= threshold ? x.v[e] * scale : 0.0f;
    } else {
      x.v[0] = stream.word(first) >= threshold ? x.v[0] * scale : 0.0f;
    }
    return x;
  }
};

// Row r of the [rows, T] matrix probs (row t = r % T of its head): P = softmax over t2 <= t, 0 beyond.
// Columns go W at a time; groups past column t are only written (zeros).
template <int W>
__global__ void softmax_forward_kernel(float* probs, int64_t T) {
  const int64_t r = blockIdx.x;
  const int64_t t = r % T;
  float* row = probs + r * T;
  const int64_t live = t / W + 1, groups = T / W;
  float m = -INFINITY;
  for (int64_t g = threadIdx.x; g < live; g += blockDim.x) {
    const Lanes<W> x = load_lanes<W>(row + g * W);
    for (int e = 0; e < W; ++e)
      if (g * W + e <= t) m = fmaxf(m, x.v[e]);
  }
  m = block_max(m);
  float sum = 0.0f;
  for (int64_t g = threadIdx.x; g < live; g += blockDim.x) {
    Lanes<W> x = load_lanes<W>(row + g * W);
    for (int e = 0; e < W; ++e) {
      x.v[e] = g * W + e <= t ? expf(x.v[e] - m) : 0.0f;
      sum += x.v[e];
    }
    store_lanes<W>(row + g * W, x);
  }
  sum = block_sum(sum);
  const float inv_sum = 1.0f / sum;
  for (int64_t g = threadIdx.x; g < groups; g += blockDim.x) {
    Lanes<W> x{};
    if (g < live) {
      x = load_lanes<W>(row + g * W);
      for (int e = 0; e < W; ++e) x.v[e] = g * W + e <= t ? x.v[e] * inv_sum : 0.0f;
    }
    store_lanes<W>(row + g * W, x);
  }
}

// x in hi's format, and (when lo is given) the rounding error x - hi in lo's.
__device__ __forceinline__ void store_split(const TensorRef& hi, const TensorRef& lo, int64_t i, float x) {
  store(hi, i, x);
  if (lo.data) store(lo, i, x - load(hi, i));
}

// hi/lo[i] = Pd at flat element first + i (i < n, W at a time): probs with the dropout mask, split.
template <int W>
__global__ void dropped_operand_kernel(TensorRef hi, TensorRef lo, const float* probs, int64_t first, int64_t n,
                                       Dropout dropout) {
  for (int64_t g = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; g < n / W;
       g += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = g * W;
    const Lanes<W> x = dropout.apply<W>(load_lanes<W>(probs + first + i), static_cast<uint64_t>(first + i));
    for (int e = 0; e < W; ++e) store_split(hi, lo, i + e, x.v[e]);
  }
}

// out[row t, column h*hs + c] of nh heads = sum[h][t][c] (F32, contiguous [nh, T, hs]), rounded once.
// out_first is the element of (t = 0, the first head's column 0); ld the row stride of out.
__global__ void store_heads_kernel(TensorRef out, int64_t out_first, int64_t ld, const float* sum, int64_t nh,
                                   int64_t T, int64_t hs) {
  const int64_t n = nh * T * hs;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t h = i / (T * hs), t = (i / hs) % T, c = i % hs;
    store(out, out_first + t * ld + h * hs + c, sum[i]);
  }
}

// Row r (of a chunk starting at flat row first_row) of dprobs: dPd in, dS out (in place), and dS split
// into ds_hi/ds_lo (row r - first_row) when they are given. Columns W at a time, as the forward.
template <int W>
__global__ void softmax_backward_kernel(float* dprobs, const float* probs, int64_t T, int64_t first_row,
                                        TensorRef ds_hi, TensorRef ds_lo, Dropout dropout) {
  const int64_t r = first_row + blockIdx.x;
  const int64_t t = r % T;
  float* drow = dprobs + r * T;
  const float* prow = probs + r * T;
  const uint64_t base = static_cast<uint64_t>(r * T);
  const int64_t live = t / W + 1, groups = T / W;
  float dot = 0.0f;
  for (int64_t g = threadIdx.x; g < live; g += blockDim.x) {
    const Lanes<W> pd = dropout.apply<W>(load_lanes<W>(prow + g * W), base + g * W);
    const Lanes<W> dpd = load_lanes<W>(drow + g * W);
    for (int e = 0; e < W; ++e)
      if (g * W + e <= t) dot += pd.v[e] * dpd.v[e];
  }
  dot = block_sum(dot);
  for (int64_t g = threadIdx.x; g < groups; g += blockDim.x) {
    Lanes<W> ds{};
    if (g < live) {
      const Lanes<W> p = load_lanes<W>(prow + g * W);
      const Lanes<W> pd = dropout.apply<W>(p, base + g * W);
      ds = load_lanes<W>(drow + g * W);
      for (int e = 0; e < W; ++e) ds.v[e] = g * W + e <= t ? pd.v[e] * ds.v[e] - p.v[e] * dot : 0.0f;
    }
    store_lanes<W>(drow + g * W, ds);
    if (ds_hi.data)
      for (int e = 0; e < W; ++e) store_split(ds_hi, ds_lo, static_cast<int64_t>(blockIdx.x) * T + g * W + e, ds.v[e]);
  }
}

using Dims = AttentionDims;

// The formats the CUDA attention takes: qkv and the [B,T,C] tensors in one of F32, BF16, F16 (the
// recipes' compute format), probs and dprobs F32 (the recipes' statistics format).
void check_formats(const char* op, DType operands, std::initializer_list<std::pair<const Tensor*, const char*>> same,
                   std::initializer_list<std::pair<const Tensor*, const char*>> f32) {
  GPT_CHECK(operands == DType::F32 || operands == DType::BF16 || operands == DType::F16,
            "{}: the CUDA backend's attention takes qkv in F32, BF16 or F16, not {}", op, dtype_name(operands));
  for (const auto& [t, name] : same)
    GPT_CHECK(t->dtype == operands, "{}: {} is {} but qkv is {}; the CUDA backend's attention keeps them in one format",
              op, name, dtype_name(t->dtype), dtype_name(operands));
  for (const auto& [t, name] : f32)
    GPT_CHECK(t->dtype == DType::F32, "{}: {} must be F32 on the CUDA backend (the recipes' statistics format), not {}",
              op, name, dtype_name(t->dtype));
}

Dropout make_dropout(const DropoutSpec& spec) {
  GPT_CHECK(spec.p >= 0.0f && spec.p < 1.0f, "dropout probability must be in [0, 1), got {}", spec.p);
  Dropout d;
  d.stream = spec.stream;
  d.active = spec.active();
  d.threshold = dropout_threshold(spec.p);
  d.scale = d.active ? static_cast<float>(1.0 / (1.0 - static_cast<double>(spec.p))) : 1.0f;
  return d;
}

constexpr int kThreads = 256;

// Threads per row block: whole warps, no more than the row's groups of W columns need.
int row_threads(int64_t T, int W) { return static_cast<int>(std::min<int64_t>(kThreads, (T / W + 31) / 32 * 32)); }

int grid_for(int64_t n) { return static_cast<int>(std::clamp<int64_t>((n + kThreads - 1) / kThreads, 1, 65535)); }

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// 128-bit row access when every row of the [rows, T] F32 matrices starts 16-byte aligned.
bool vector_rows(int64_t T, std::initializer_list<const void*> matrices) {
  if (T % 4 != 0) return false;
  for (const void* m : matrices)
    if (!aligned16(m)) return false;
  return true;
}

void launch_softmax_forward(float* probs, int64_t rows, int64_t T, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(rows));
  if (vector_rows(T, {probs}))
    launch<softmax_forward_kernel<4>>(grid, dim3(row_threads(T, 4)), 0, stream, probs, T);
  else
    launch<softmax_forward_kernel<1>>(grid, dim3(row_threads(T, 1)), 0, stream, probs, T);
}

void launch_dropped_operand(TensorRef hi, TensorRef lo, const float* probs, int64_t first, int64_t n,
                            const Dropout& dropout, cudaStream_t stream) {
  if (first % 4 == 0 && n % 4 == 0 && aligned16(probs + first))
    launch<dropped_operand_kernel<4>>(dim3(grid_for(n / 4)), dim3(kThreads), 0, stream, hi, lo, probs, first, n, dropout);
  else
    launch<dropped_operand_kernel<1>>(dim3(grid_for(n)), dim3(kThreads), 0, stream, hi, lo, probs, first, n, dropout);
}

void launch_softmax_backward(float* dprobs, const float* probs, int64_t T, int64_t first_row, int64_t rows,
                             TensorRef hi, TensorRef lo, const Dropout& dropout, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(rows));
  if (vector_rows(T, {dprobs, probs}))
    launch<softmax_backward_kernel<4>>(grid, dim3(row_threads(T, 4)), 0, stream, dprobs, probs, T, first_row, hi, lo,
                                       dropout);
  else
    launch<softmax_backward_kernel<1>>(grid, dim3(row_threads(T, 1)), 0, stream, dprobs, probs, T, first_row, hi, lo,
                                       dropout);
}


// Heads whose copies fit in the scratch at once, per_head bytes each.
int64_t heads_per_chunk(const Dims& d, size_t per_head, const DeviceContext& ctx, const char* op) {
  GPT_CHECK(per_head <= ctx.scratch_bytes,
            "{}: one head's T x T operand copies need {} bytes, more than the backend's {}-byte scratch (T = {} is too "
            "long for the materialised attention)",
            op, per_head, ctx.scratch_bytes, d.seq);
  return std::min<int64_t>(d.heads, static_cast<int64_t>(ctx.scratch_bytes / per_head));
}

// The scratch of one chunk of heads with narrow operands: P or dS split (hi, lo) and the FP32 sums,
// each 256-byte aligned.
struct SplitScratch {
  void* hi = nullptr;
  void* lo = nullptr;
  float* sum = nullptr;

  static size_t align(size_t bytes) { return (bytes + 255) / 256 * 256; }
  static size_t bytes(const Dims& d, DType op, int64_t heads) {
    return 2 * align(static_cast<size_t>(heads * d.seq * d.seq) * dtype_size(op)) +
           static_cast<size_t>(heads * d.seq * d.head_size) * sizeof(float);
  }
  // The most heads whose split copies fit in the scratch.
  static int64_t chunk(const Dims& d, DType op, const DeviceContext& ctx, const char* op_name) {
    // bytes() pads each copy once, not per head, so scratch / bytes(1 head) may undercount by one or more.
    int64_t heads = heads_per_chunk(d, bytes(d, op, 1), ctx, op_name);
    while (heads < d.heads && bytes(d, op, heads + 1) <= ctx.scratch_bytes) ++heads;
    return heads;
  }
  SplitScratch(const DeviceContext& ctx, const Dims& d, DType op, int64_t heads) {
    const size_t square = align(static_cast<size_t>(heads * d.seq * d.seq) * dtype_size(op));
    hi = ctx.scratch;
    lo = static_cast<char*>(ctx.scratch) + square;
    sum = reinterpret_cast<float*>(static_cast<char*>(ctx.scratch) + 2 * square);
  }
};

// Views of one head's matrices (h the first head of a batch over heads, stride hs).
struct HeadViews {
  const Dims& d;
  DType dtype;
  MatrixView qkv_part(void* qkv, int64_t b, int64_t h, int part) const {
    char* base = static_cast<char*>(qkv) + ((b * d.seq * 3 * d.channels) + part * d.channels + h * d.head_size) *
                                               static_cast<int64_t>(dtype_size(dtype));
    return {base, dtype, d.seq, d.head_size, 3 * d.channels, d.head_size};
  }
  MatrixView rows(void* x, int64_t b, int64_t h) const {  // [B,T,C] tensors
    char* base = static_cast<char*>(x) + (b * d.seq * d.channels + h * d.head_size) * static_cast<int64_t>(dtype_size(dtype));
    return {base, dtype, d.seq, d.head_size, d.channels, d.head_size};
  }
  // A [T,T] per head matrix of a chunk: F32 probs/dprobs (at head b*NH + h) or a copy (at head h).
  MatrixView square(void* base, DType t, int64_t head) const {
    return {static_cast<char*>(base) + head * d.seq * d.seq * static_cast<int64_t>(dtype_size(t)), t, d.seq, d.seq, d.seq,
            d.seq * d.seq};
  }
};

// out (nh heads' columns, rows of stride ld from element out_first) = alpha op(x) b, x given split
// (x = hi + lo): two products summed in FP32 in scratch.sum, then rounded once into out.
void split_product(Gemm& gemm, const TensorRef& out, int64_t out_first, int64_t ld, const MatrixView& hi,
                   const MatrixView& lo, bool trans_x, const MatrixView& b, float alpha, const Dims& d, int64_t nh,
                   float* sum, cudaStream_t stream) {
  const MatrixView acc{sum, DType::F32, d.seq, d.head_size, d.head_size, d.seq * d.head_size};
  const int batch = static_cast<int>(nh);
  gemm.batched_matmul({acc, lo, b, trans_x, false, alpha, 0.0f, batch}, stream);
  gemm.batched_matmul({acc, hi, b, trans_x, false, alpha, 1.0f, batch}, stream);
  const int64_t n = nh * d.seq * d.head_size;
  launch<store_heads_kernel>(dim3(grid_for(n)), dim3(kThreads), 0, stream, out, out_first, ld, sum, nh, d.seq,
                             d.head_size);
}

}  // namespace

void attention_forward(const AttentionForwardArgs& args, const DeviceContext& ctx) {
  if (args.probs.ndim == 3) return flash_attention_forward(args, ctx);
  const Dims d = check_attention_forward(args);
  const DType op = args.qkv.dtype;
  check_formats("attention_forward", op, {{&args.out, "out"}}, {{&args.probs, "probs"}});
  const Dropout dropout = make_dropout(args.dropout);
  if (d.batch == 0 || d.seq == 0) return;
  const bool wide = op == DType::F32;
  // With F32 operands Pd is P itself when nothing is dropped, else a copy; narrow operands take it split.
  // (Checked before anything is queued, so a refusal leaves no work in flight.)
  const int64_t chunk = wide ? (dropout.active ? heads_per_chunk(d, static_cast<size_t>(d.seq * d.seq) * 4, ctx,
                                                                 "attention_forward")
                                               : d.heads)
                             : SplitScratch::chunk(d, op, ctx, "attention_forward");
  Gemm& gemm = *ctx.gemm;
  const HeadViews v{d, op};
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d.head_size)));
  for (int64_t b = 0; b < d.batch; ++b) {
    gemm.batched_matmul({v.square(args.probs.data, DType::F32, b * d.heads), v.qkv_part(args.qkv.data, b, 0, 0),
                         v.qkv_part(args.qkv.data, b, 0, 1), false, true, scale, 0.0f, static_cast<int>(d.heads)},
                        ctx.stream);
  }
  launch_softmax_forward(args.probs.f32(), d.batch * d.heads * d.seq, d.seq, ctx.stream);
  const auto* probs = static_cast<const float*>(args.probs.data);
  const TensorRef out = tensor_ref(args.out);
  for (int64_t b = 0; b < d.batch; ++b) {
    for (int64_t h0 = 0; h0 < d.heads; h0 += chunk) {
      const int64_t nh = std::min(chunk, d.heads - h0);
      const int64_t first = (b * d.heads + h0) * d.seq * d.seq, n = nh * d.seq * d.seq;
      const MatrixView val = v.qkv_part(args.qkv.data, b, h0, 2);
      if (wide) {
        MatrixView pd = v.square(args.probs.data, DType::F32, b * d.heads + h0);
        if (dropout.active) {
          launch_dropped_operand(TensorRef{ctx.scratch, op, nullptr}, TensorRef{}, probs, first, n, dropout, ctx.stream);
          pd = v.square(ctx.scratch, op, 0);
        }
        gemm.batched_matmul({v.rows(args.out.data, b, h0), pd, val, false, false, 1.0f, 0.0f, static_cast<int>(nh)},
                            ctx.stream);
        continue;
      }
      const SplitScratch split(ctx, d, op, nh);
      launch_dropped_operand(TensorRef{split.hi, op, nullptr}, TensorRef{split.lo, op, nullptr}, probs, first, n, dropout,
                             ctx.stream);
      split_product(gemm, out, b * d.seq * d.channels + h0 * d.head_size, d.channels, v.square(split.hi, op, 0),
                    v.square(split.lo, op, 0), false, val, 1.0f, d, nh, split.sum, ctx.stream);
    }
  }
}

void attention_backward(const AttentionBackwardArgs& args, const DeviceContext& ctx) {
  if (args.probs.ndim == 3) return flash_attention_backward(args, ctx);
  const Dims d = check_attention_backward(args);
  const DType op = args.qkv.dtype;
  check_formats("attention_backward", op, {{&args.dout, "dout"}, {&args.dqkv, "dqkv"}},
                {{&args.probs, "probs"}, {&args.dprobs, "dprobs"}});
  const Dropout dropout = make_dropout(args.dropout);
  if (d.batch == 0 || d.seq == 0) return;
  Gemm& gemm = *ctx.gemm;
  const HeadViews v{d, op};
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d.head_size)));
  const bool wide = op == DType::F32;
  const int64_t chunk = wide ? d.heads : SplitScratch::chunk(d, op, ctx, "attention_backward");
  const auto* probs = static_cast<const float*>(args.probs.data);
  const TensorRef dqkv = tensor_ref(args.dqkv);
  for (int64_t b = 0; b < d.batch; ++b) {
    for (int64_t h0 = 0; h0 < d.heads; h0 += chunk) {
      const int64_t nh = std::min(chunk, d.heads - h0), head = b * d.heads + h0;
      const int64_t first = head * d.seq * d.seq, n = nh * d.seq * d.seq;
      const int batch = static_cast<int>(nh);
      const MatrixView dprobs = v.square(args.dprobs.data, DType::F32, head);
      const MatrixView q = v.qkv_part(args.qkv.data, b, h0, 0), k = v.qkv_part(args.qkv.data, b, h0, 1);
      const MatrixView val = v.qkv_part(args.qkv.data, b, h0, 2), dout = v.rows(args.dout.data, b, h0);
      const auto softmax_backward = [&](TensorRef hi, TensorRef lo) {
        launch_softmax_backward(args.dprobs.f32(), probs, d.seq, head * d.seq, nh * d.seq, hi, lo, dropout, ctx.stream);
      };
      if (wide) {
        // Pd in dprobs (until dPd overwrites it), or P itself; then dS in place in dprobs.
        MatrixView pd = v.square(args.probs.data, DType::F32, head);
        if (dropout.active) {
          launch_dropped_operand(TensorRef{dprobs.data, op, nullptr}, TensorRef{}, probs, first, n, dropout, ctx.stream);
          pd = dprobs;
        }
        gemm.batched_matmul({v.qkv_part(args.dqkv.data, b, h0, 2), pd, dout, true, false, 1.0f, 0.0f, batch}, ctx.stream);
        gemm.batched_matmul({dprobs, dout, val, false, true, 1.0f, 0.0f, batch}, ctx.stream);
        softmax_backward(TensorRef{}, TensorRef{});
        gemm.batched_matmul({v.qkv_part(args.dqkv.data, b, h0, 0), dprobs, k, false, false, scale, 0.0f, batch}, ctx.stream);
        gemm.batched_matmul({v.qkv_part(args.dqkv.data, b, h0, 1), dprobs, q, true, false, scale, 0.0f, batch}, ctx.stream);
        continue;
      }
      // Narrow operands: Pd split for dv, then dS split (over Pd's copies) for dq and dk.
      const SplitScratch split(ctx, d, op, nh);
      const TensorRef hi{split.hi, op, nullptr}, lo{split.lo, op, nullptr};
      const MatrixView hi_view = v.square(split.hi, op, 0), lo_view = v.square(split.lo, op, 0);
      const int64_t row0 = b * d.seq * 3 * d.channels + h0 * d.head_size, ld = 3 * d.channels;
      launch_dropped_operand(hi, lo, probs, first, n, dropout, ctx.stream);
      split_product(gemm, dqkv, row0 + 2 * d.channels, ld, hi_view, lo_view, true, dout, 1.0f, d, nh, split.sum,
                    ctx.stream);
      gemm.batched_matmul({dprobs, dout, val, false, true, 1.0f, 0.0f, batch}, ctx.stream);
      softmax_backward(hi, lo);
      split_product(gemm, dqkv, row0, ld, hi_view, lo_view, false, k, scale, d, nh, split.sum, ctx.stream);
      split_product(gemm, dqkv, row0 + d.channels, ld, hi_view, lo_view, true, q, scale, d, nh, split.sum, ctx.stream);
    }
  }
}

}  // namespace gpt::cuda
