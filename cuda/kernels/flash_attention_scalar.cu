// The fused attention's scalar kernels and its shared parts: the argument checks, and the delta kernel
// both backward paths start with (a lane group a row, in 16-byte packs where the layout allows). The math
// is flash_attention.cu's (online softmax, probabilities recomputed from the log-sum-exp,
// D = rowsum(dout ⊙ out), no T x T matrix in memory), on FP32 FMAs:
//   forward:  one thread per query row, over its keys t2 <= t with a running max and sum;
//   backward: one thread per query row for dq, one per key row for dk and dv (over the rows t >= t2);
// every thread reads its tensors by their format and writes only its own row, so results are bitwise
// reproducible. This is the path for head sizes past kMaxTiledHeadSize (flash_attention_tiled.cu takes
// FP32 and every head size up to it); it is correct at any T, and slow: no tensor cores, each thread
// rereads every key row and keeps its row's accumulators (up to kMaxScalarHeadSize floats) in local memory.
#include "kernels/flash_attention.h"
#include "kernels/flash_attention_params.h"

#include "backend/op_checks.h"
#include "common/cuda_check.h"
#include "common/launch.cuh"
#include "common/block_reduce.cuh"
#include "common/tensor_access.cuh"
#include "common/vector_access.cuh"

#include <algorithm>
#include <cmath>

namespace gpt::cuda {
namespace {

constexpr int kThreads = 128;

struct Rows {
  int64_t bh, t, b, h;
};

__device__ __forceinline__ Rows row_of(const FlashParams& p, int64_t i) {
  const int64_t bh = i / p.T;
  return {bh, i % p.T, bh / p.heads, bh % p.heads};
}

// Element offsets of row t of head h: in qkv (part 0, 1, 2 = q, k, v) and in a [B,T,C] tensor.
__device__ __forceinline__ int64_t qkv_at(const FlashParams& p, int64_t b, int64_t t, int64_t h, int part) {
  return (b * p.T + t) * 3 * p.C + part * p.C + h * p.head_size;
}
__device__ __forceinline__ int64_t rows_at(const FlashParams& p, int64_t b, int64_t t, int64_t h) {
  return (b * p.T + t) * p.C + h * p.head_size;
}

__device__ __forceinline__ float dot(const TensorRef& x, int64_t at, const float* y, int64_t n) {
  float s = 0.0f;
  for (int64_t c = 0; c < n; ++c) s = fmaf(load(x, at + c), y[c], s);
  return s;
}

#define GPT_FLASH_GRID_LOOP(i, n) \
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)

__global__ void scalar_forward_kernel(FlashParams p) {
  const TensorRef qkv{const_cast<void*>(p.qkv), p.dtype, nullptr}, out{p.out, p.dtype, nullptr};
  const int64_t hs = p.head_size;
  GPT_FLASH_GRID_LOOP(i, p.batch_heads * p.T) {
    const Rows r = row_of(p, i);
    float q[kMaxScalarHeadSize], o[kMaxScalarHeadSize];
    for (int64_t c = 0; c < hs; ++c) {
      q[c] = load(qkv, qkv_at(p, r.b, r.t, r.h, 0) + c);
      o[c] = 0.0f;
    }
    float m = -INFINITY, l = 0.0f;
    for (int64_t t2 = 0; t2 <= r.t; ++t2) {
      const float s = p.scale * dot(qkv, qkv_at(p, r.b, t2, r.h, 1), q, hs);
      if (s > m) {
        const float correction = expf(m - s);
        l *= correction;
        for (int64_t c = 0; c < hs; ++c) o[c] *= correction;
        m = s;
      }
      const float e = expf(s - m);
      l += e;
      const float w = p.dropout.active ? e * p.dropout.factor(attention_mask_element(r.bh, p.T, r.t, t2)) : e;
      if (w == 0.0f) continue;
      const int64_t v = qkv_at(p, r.b, t2, r.h, 2);
      for (int64_t c = 0; c < hs; ++c) o[c] = fmaf(w, load(qkv, v + c), o[c]);
    }
    const float inv = 1.0f / l;
    for (int64_t c = 0; c < hs; ++c) store(out, rows_at(p, r.b, r.t, r.h) + c, o[c] * inv);
    p.lse[i] = m + logf(l);
  }
}

// D[i] = dout_i . out_i for every (b, h, t) row i: `width` lanes a row (a power of two up to the warp,
// one pack of kPack elements each: 8 lanes at head size 64, so a warp reads 4 rows at a time), a lane
// summing its packs' products in order and a butterfly within the group adding the lanes; 16-byte loads
// where `vector` (head size and C multiples of kPack, both tensors aligned), element loads otherwise.
// At least 8 blocks a multiprocessor (64 registers a thread): with the thread count alone ptxas (CUDA 13)
// held it to 48 registers and spilled.
__global__ void __launch_bounds__(kThreads, 8) delta_kernel(FlashBackwardParams p, int width, bool vector) {
  const TensorRef out{p.out, p.dtype, nullptr}, dout{const_cast<void*>(p.dout), p.dtype, nullptr};
  const int hs = static_cast<int>(p.head_size), packs = (hs + kPack - 1) / kPack;
  const int lane = threadIdx.x % warpSize, slot = lane / width, sub = lane % width;
  const int64_t rows = p.batch_heads * p.T, rows_per_warp = warpSize / width;
  const int64_t warp = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) / warpSize;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * blockDim.x / warpSize;
  for (int64_t base = warp * rows_per_warp; base < rows; base += warps * rows_per_warp) {  // uniform in a warp
    const int64_t i = base + slot;
    float d = 0.0f;
    if (i < rows) {
      const Rows r = row_of(p, i);
      const int64_t at = rows_at(p, r.b, r.t, r.h);
      for (int k = sub; k < packs; k += width) {
        const int count = std::min(int{kPack}, hs - k * kPack);
        float x[kPack], y[kPack];
        load_values(dout, at + k * kPack, count, vector, x);
        load_values(out, at + k * kPack, count, vector, y);
        for (int e = 0; e < kPack; ++e) d = fmaf(x[e], y[e], d);
      }
    }
    d = group_sum(d, width);
    if (i < rows && sub == 0) p.delta[i] = d;
  }
}

// D = rowsum(Pd ⊙ dPd) = sum over t2 <= t of P M/(1-p) (dout_t . v_t2), P recomputed from the log-sum-exp.
__global__ void delta_from_probabilities_kernel(FlashBackwardParams p) {
  const TensorRef qkv{const_cast<void*>(p.qkv), p.dtype, nullptr}, dout{const_cast<void*>(p.dout), p.dtype, nullptr};
  const int64_t hs = p.head_size;
  GPT_FLASH_GRID_LOOP(i, p.batch_heads * p.T) {
    const Rows r = row_of(p, i);
    float q[kMaxScalarHeadSize], dO[kMaxScalarHeadSize];
    for (int64_t c = 0; c < hs; ++c) {
      q[c] = load(qkv, qkv_at(p, r.b, r.t, r.h, 0) + c);
      dO[c] = load(dout, rows_at(p, r.b, r.t, r.h) + c);
    }
    float d = 0.0f;
    for (int64_t t2 = 0; t2 <= r.t; ++t2) {
      const float prob = expf(p.scale * dot(qkv, qkv_at(p, r.b, t2, r.h, 1), q, hs) - p.lse[i]);
      const float f = p.dropout.active ? p.dropout.factor(attention_mask_element(r.bh, p.T, r.t, t2)) : 1.0f;
      if (f != 0.0f) d = fmaf(prob * f, dot(qkv, qkv_at(p, r.b, t2, r.h, 2), dO, hs), d);
    }
    p.delta[i] = d;
  }
}

__global__ void scalar_dq_kernel(FlashBackwardParams p) {
  const TensorRef qkv{const_cast<void*>(p.qkv), p.dtype, nullptr}, dqkv{p.dqkv, p.dtype, nullptr};
  const TensorRef dout{const_cast<void*>(p.dout), p.dtype, nullptr};
  const int64_t hs = p.head_size;
  GPT_FLASH_GRID_LOOP(i, p.batch_heads * p.T) {
    const Rows r = row_of(p, i);
    float q[kMaxScalarHeadSize], dO[kMaxScalarHeadSize], dq[kMaxScalarHeadSize];
    for (int64_t c = 0; c < hs; ++c) {
      q[c] = load(qkv, qkv_at(p, r.b, r.t, r.h, 0) + c);
      dO[c] = load(dout, rows_at(p, r.b, r.t, r.h) + c);
      dq[c] = 0.0f;
    }
    const float lse = p.lse[i], delta = p.delta[i];
    for (int64_t t2 = 0; t2 <= r.t; ++t2) {
      const int64_t k = qkv_at(p, r.b, t2, r.h, 1);
      const float prob = expf(p.scale * dot(qkv, k, q, hs) - lse);
      const float f = p.dropout.active ? p.dropout.factor(attention_mask_element(r.bh, p.T, r.t, t2)) : 1.0f;
      const float ds = prob * (dot(qkv, qkv_at(p, r.b, t2, r.h, 2), dO, hs) * f - delta);
      for (int64_t c = 0; c < hs; ++c) dq[c] = fmaf(ds, load(qkv, k + c), dq[c]);
    }
    for (int64_t c = 0; c < hs; ++c) store(dqkv, qkv_at(p, r.b, r.t, r.h, 0) + c, dq[c] * p.scale);
  }
}

__global__ void scalar_dkv_kernel(FlashBackwardParams p) {
  const TensorRef qkv{const_cast<void*>(p.qkv), p.dtype, nullptr}, dqkv{p.dqkv, p.dtype, nullptr};
  const TensorRef dout{const_cast<void*>(p.dout), p.dtype, nullptr};
  const int64_t hs = p.head_size;
  GPT_FLASH_GRID_LOOP(i, p.batch_heads * p.T) {
    const Rows r = row_of(p, i);  // r.t is the key row
    float k[kMaxScalarHeadSize], v[kMaxScalarHeadSize], dk[kMaxScalarHeadSize], dv[kMaxScalarHeadSize];
    for (int64_t c = 0; c < hs; ++c) {
      k[c] = load(qkv, qkv_at(p, r.b, r.t, r.h, 1) + c);
      v[c] = load(qkv, qkv_at(p, r.b, r.t, r.h, 2) + c);
      dk[c] = dv[c] = 0.0f;
    }
    for (int64_t t = r.t; t < p.T; ++t) {
      const int64_t q = qkv_at(p, r.b, t, r.h, 0), dO = rows_at(p, r.b, t, r.h);
      const int64_t row = r.bh * p.T + t;
      const float prob = expf(p.scale * dot(qkv, q, k, hs) - p.lse[row]);
      const float f = p.dropout.active ? p.dropout.factor(attention_mask_element(r.bh, p.T, t, r.t)) : 1.0f;
      const float ds = prob * (dot(dout, dO, v, hs) * f - p.delta[row]);
      const float pd = prob * f;
      for (int64_t c = 0; c < hs; ++c) {
        dv[c] = fmaf(pd, load(dout, dO + c), dv[c]);
        dk[c] = fmaf(ds, load(qkv, q + c), dk[c]);
      }
    }
    for (int64_t c = 0; c < hs; ++c) {
      store(dqkv, qkv_at(p, r.b, r.t, r.h, 1) + c, dk[c] * p.scale);
      store(dqkv, qkv_at(p, r.b, r.t, r.h, 2) + c, dv[c]);
    }
  }
}

#undef GPT_FLASH_GRID_LOOP

dim3 rows_grid(const FlashParams& p) {
  return dim3(static_cast<unsigned>(std::clamp<int64_t>((p.batch_heads * p.T + kThreads - 1) / kThreads, 1, 65535)));
}

void check_stats(const Tensor& t, const char* op, const char* name, int64_t B, int64_t NH, int64_t T) {
  GPT_CHECK(t.ndim == 3 && t.dim(0) == B && t.dim(1) == NH && t.dim(2) == T && t.dtype == DType::F32,
            "{}: the fused attention's {} must be F32 ({},{},{}) (one value per head and row), got {} {}", op, name, B,
            NH, T, dtype_name(t.dtype), t.shape_string());
}

}  // namespace

FlashParams flash_params(const Tensor& qkv, const Tensor& out, const Tensor& lse, int n_head, const DropoutSpec& dropout,
                         const char* op, bool any_out_format) {
  const AttentionDims d = check_attention_operands(op, qkv, out, n_head);
  const int64_t B = d.batch, T = d.seq, C = d.channels;
  const DType f = qkv.dtype;
  GPT_CHECK(f == DType::F32 || f == DType::BF16 || f == DType::F16,
            "{}: the CUDA backend's attention takes qkv in F32, BF16 or F16, not {}", op, dtype_name(f));
  GPT_CHECK(any_out_format || out.dtype == f,
            "{}: out is {} but qkv is {}; the CUDA backend's attention keeps them in one format", op,
            dtype_name(out.dtype), dtype_name(f));
  check_stats(lse, op, "log-sum-exp (probs)", B, n_head, T);
  const int64_t hs = C / n_head;
  GPT_CHECK(hs <= kMaxScalarHeadSize,
            "{}: head size {} (n_embd {} / n_head {}) has no fused CUDA attention kernel: the tensor-core kernels take "
            "64 and 128 (BF16, F16), the scalar ones up to {}; choose another n_head, or set train.attention: "
            "materialised",
            op, hs, C, n_head, kMaxScalarHeadSize);
  GPT_CHECK(dropout.p >= 0.0f && dropout.p < 1.0f, "dropout probability must be in [0, 1), got {}", dropout.p);
  FlashParams p;
  p.qkv = qkv.data;
  p.out = out.data;
  p.lse = static_cast<float*>(lse.data);
  p.dtype = f;
  p.T = T;
  p.C = C;
  p.head_size = hs;
  p.heads = n_head;
  p.batch_heads = B * n_head;
  p.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hs)));
  p.scale_log2 = static_cast<float>(1.4426950408889634 / std::sqrt(static_cast<double>(hs)));
  p.dropout.stream = dropout.stream;
  p.dropout.active = dropout.active();
  p.dropout.threshold = dropout_threshold(dropout.p);
  p.dropout.scale = dropout.active() ? static_cast<float>(1.0 / (1.0 - static_cast<double>(dropout.p))) : 1.0f;
  return p;
}

dim3 fused_attention_grid(const FlashParams& p, int64_t rows_per_block) {
  GPT_CHECK(p.batch_heads <= 65535, "attention: B x n_head = {} is more than the 65535 the fused kernels' grid takes",
            p.batch_heads);
  return dim3(static_cast<unsigned>((p.T + rows_per_block - 1) / rows_per_block), static_cast<unsigned>(p.batch_heads));
}

FlashBackwardParams flash_backward_params(const AttentionBackwardArgs& args) {
  const char* op = "attention_backward";
  FlashBackwardParams p;
  static_cast<FlashParams&>(p) = flash_params(args.qkv, args.out, args.probs, args.n_head, args.dropout, op, true);
  p.out_in_compute_format = args.out.dtype == p.dtype;
  GPT_CHECK(args.dout.ndim == 3 && args.dout.numel() == args.out.numel() && args.dout.dtype == p.dtype,
            "{}: dout must be {} {} like out, got {} {}", op, dtype_name(p.dtype), args.out.shape_string(),
            dtype_name(args.dout.dtype), args.dout.shape_string());
  GPT_CHECK(args.dqkv.ndim == 3 && args.dqkv.numel() == args.qkv.numel() && args.dqkv.dtype == p.dtype,
            "{}: dqkv must be {} {} like qkv, got {} {}", op, dtype_name(p.dtype), args.qkv.shape_string(),
            dtype_name(args.dqkv.dtype), args.dqkv.shape_string());
  check_stats(args.dprobs, op, "delta scratch (dprobs)", args.qkv.dim(0), args.n_head, args.qkv.dim(1));
  p.dout = args.dout.data;
  p.dqkv = args.dqkv.data;
  p.delta = static_cast<float*>(args.dprobs.data);
  return p;
}

void scalar_flash_forward(const FlashParams& p, cudaStream_t stream) {
  launch<scalar_forward_kernel>(rows_grid(p), dim3(kThreads), 0, stream, p);
}

void attention_delta(const FlashBackwardParams& p, bool tiled, cudaStream_t stream) {
  if (p.out_in_compute_format) {
    const int width = lanes_per_row((p.head_size + kPack - 1) / kPack);
    const bool vector = p.head_size % kPack == 0 && p.C % kPack == 0 && pack_aligned(p.out, p.dtype) &&
                        pack_aligned(p.dout, p.dtype);
    const int64_t warps = (p.batch_heads * p.T + 32 / width - 1) / (32 / width);
    const dim3 grid(static_cast<unsigned>(std::clamp<int64_t>((warps * 32 + kThreads - 1) / kThreads, 1, 65535)));
    launch<delta_kernel>(grid, dim3(kThreads), 0, stream, p, width, vector);
  } else if (tiled) {
    tiled_attention_delta_from_probabilities(p, stream);
  } else {
    launch<delta_from_probabilities_kernel>(rows_grid(p), dim3(kThreads), 0, stream, p);
  }
}

void scalar_flash_backward(const FlashBackwardParams& p, cudaStream_t stream) {
  launch<scalar_dq_kernel>(rows_grid(p), dim3(kThreads), 0, stream, p);
  launch<scalar_dkv_kernel>(rows_grid(p), dim3(kThreads), 0, stream, p);
}

}  // namespace gpt::cuda
