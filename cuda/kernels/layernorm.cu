// LayerNorm over the last dimension C of in [N,C] (leading dimensions folded), as src/cpu/layernorm.cpp:
//   mean = sum(x)/C, rstd = 1/sqrt(sum((x-mean)^2)/C + eps), n = (x-mean)*rstd, out = n*w + b,
// mean and rstd [N] saved. Backward, with dn = w*dout:
//   din += (dn - mean(dn) - n*mean(dn*n)) * rstd,  dweight += sum_rows(dout*n),  dbias += sum_rows(dout).
// Every tensor is read and written in its own format (row_chunks.cuh: 8 elements a chunk, 128-bit
// accesses where the rows allow); statistics and sums in FP32.
//
// Forward: one warp per row (8 rows a block); three passes over the row (sum, centred sum of squares,
// output), the later ones re-reading it from cache; the variance is the centred two-pass one.
// Backward: one fused kernel computes din and the weight/bias partial sums; G blocks of a thread per
// chunk of the row (at most 256) take rows g, g+G, g+2G, ... in order. For each row the block reduces mean(dn) and mean(dn*n) (block_sum,
// fixed order), adds din, and adds dout*n and dout to per-block column sums in shared memory, where the
// thread that owns a chunk of columns is the same for every row, so no two threads add to one sum. Each
// block writes its column sums to ctx.scratch ([G][2][C] floats); a second kernel adds the G partials of
// each column in block order and accumulates them into dweight and dbias. No atomics: the result depends
// only on N, C and G (fixed by the shape and the device's SM count), so it is bitwise reproducible.
//
// Fused with the residual stream (op_args.h's ResidualLayerNormForwardArgs, LayerNormResidualBackwardArgs;
// the model runs them at every LayerNorm but the first block's ln1):
//   - forward: the first pass computes in = residual + dropout(x) (residual.cu's arithmetic, its Philox
//     mask by flat element), stores it, and sums it as stored (read back by the thread that wrote it, so
//     the statistics are those of the rounded sum that backward will read); the other passes are the plain
//     kernel's. One launch instead of two and one read of the sum fewer; the bits are those of
//     residual_forward followed by layernorm_forward.
//   - backward: right after a chunk of din is stored, the same thread reads it back and writes the
//     branch's gradient dx = keep * din / (1-p) (residual.cu's backward) in dx's format: no separate pass
//     over din. Without dropout into an FP8 dx of din's own scaling, where residual_backward is a byte
//     copy that a decode and encode would not repeat exactly, the two ops run apart.
#include "kernels/layernorm.h"

#include "backend/fused_args.h"
#include "backend/op_checks.h"
#include "common/block_reduce.cuh"
#include "common/dropout_chunk.cuh"
#include "common/cuda_check.h"
#include "common/launch.cuh"
#include "common/row_chunks.cuh"
#include "kernels/residual.h"

#include <algorithm>
#include <initializer_list>
#include <utility>

namespace gpt::cuda {
namespace {

constexpr int kForwardThreads = 256;  // 8 warps: 8 rows a block
constexpr int kBackwardThreads = 256;

struct ForwardParams {
  TensorRef out, mean, rstd, in, weight, bias;
  int64_t rows;
  int c;
  float eps;
  bool vector;
};

// The sum of a row as LayerNorm reads it: in = residual + dropout(x) when the residual add is fused.
struct ResidualParams {
  TensorRef residual, x;
  DropoutRule dropout;
};

// Passes two and three of the forward over one row, and its statistics, given the row's sum.
__device__ __forceinline__ void normalise_row(const ForwardParams& p, int64_t row, int lane, float sum) {
  const int chunks = (p.c + kChunk - 1) / kChunk;
  const int64_t base = row * p.c;
  const float in_scale_inv = read_scale_inv(p.in);
  const float w_scale_inv = read_scale_inv(p.weight), b_scale_inv = read_scale_inv(p.bias);
  float v[kChunk];
  const float mean = warp_sum(sum) / p.c;

  float sq = 0.0f;
  for (int j = lane; j < chunks; j += warpSize) {
    const int n = min(kChunk, p.c - j * kChunk);
    load_chunk(p.in, base + j * kChunk, n, p.vector, v, in_scale_inv);
    for (int k = 0; k < n; ++k) sq += (v[k] - mean) * (v[k] - mean);
  }
  const float rstd = rsqrtf(warp_sum(sq) / p.c + p.eps);

  Fp8Tally out_tally;
  const float out_scale = write_scale(p.out);
  Fp8Tally* out_t = p.out.scaling ? &out_tally : nullptr;
  float w[kChunk], b[kChunk];
  for (int j = lane; j < chunks; j += warpSize) {
    const int n = min(kChunk, p.c - j * kChunk);
    load_chunk(p.in, base + j * kChunk, n, p.vector, v, in_scale_inv);
    load_chunk(p.weight, j * kChunk, n, p.vector, w, w_scale_inv);
    load_chunk(p.bias, j * kChunk, n, p.vector, b, b_scale_inv);
    for (int k = 0; k < kChunk; ++k) v[k] = (v[k] - mean) * rstd * w[k] + b[k];
    store_chunk(p.out, base + j * kChunk, n, p.vector, v, out_scale, out_t);
  }
  flush_fp8_tally(p.out.scaling, out_tally);
  if (lane == 0) {
    Fp8Tally mean_tally, rstd_tally;
    store(p.mean, row, mean, write_scale(p.mean), true, p.mean.scaling ? &mean_tally : nullptr);
    store(p.rstd, row, rstd, write_scale(p.rstd), true, p.rstd.scaling ? &rstd_tally : nullptr);
    flush_fp8_tally(p.mean.scaling, mean_tally);
    flush_fp8_tally(p.rstd.scaling, rstd_tally);
  }
}

__global__ void __launch_bounds__(kForwardThreads) layernorm_forward_kernel(ForwardParams p) {
  const int lane = threadIdx.x % warpSize;
  const int warps = blockDim.x / warpSize;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * warps + threadIdx.x / warpSize;
  if (row >= p.rows) return;  // a whole warp leaves together, so the warp sums below stay complete
  const int chunks = (p.c + kChunk - 1) / kChunk;
  const int64_t base = row * p.c;
  const float in_scale_inv = read_scale_inv(p.in);
  float v[kChunk];
  float sum = 0.0f;
  for (int j = lane; j < chunks; j += warpSize) {
    const int n = min(kChunk, p.c - j * kChunk);
    load_chunk(p.in, base + j * kChunk, n, p.vector, v, in_scale_inv);
    for (int k = 0; k < kChunk; ++k) sum += v[k];
  }
  normalise_row(p, row, lane, sum);
}

__global__ void __launch_bounds__(kForwardThreads) residual_layernorm_forward_kernel(ForwardParams p, ResidualParams r) {
  const int lane = threadIdx.x % warpSize;
  const int warps = blockDim.x / warpSize;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * warps + threadIdx.x / warpSize;
  if (row >= p.rows) return;
  const int chunks = (p.c + kChunk - 1) / kChunk;
  const int64_t base = row * p.c;
  const float r_scale_inv = read_scale_inv(r.residual), x_scale_inv = read_scale_inv(r.x);
  const float in_scale_inv = read_scale_inv(p.in), in_scale = write_scale(p.in);
  Fp8Tally in_tally;
  Fp8Tally* in_t = p.in.scaling ? &in_tally : nullptr;
  float a[kChunk], v[kChunk];
  bool keep[kChunk];
  float sum = 0.0f;
  for (int j = lane; j < chunks; j += warpSize) {
    const int n = min(kChunk, p.c - j * kChunk);
    const int64_t i = base + j * kChunk;
    load_chunk(r.residual, i, n, p.vector, a, r_scale_inv);
    load_chunk(r.x, i, n, p.vector, v, x_scale_inv);
    if (r.dropout.active) {
      dropout_keep(r.dropout, static_cast<uint64_t>(i), keep);
      for (int k = 0; k < kChunk; ++k) v[k] = static_cast<float>(a[k] + (keep[k] ? v[k] * r.dropout.scale : 0.0));
    } else {
      for (int k = 0; k < kChunk; ++k) v[k] = a[k] + v[k];
    }
    store_chunk(p.in, i, n, p.vector, v, in_scale, in_t);
    load_chunk(p.in, i, n, p.vector, v, in_scale_inv);
    for (int k = 0; k < kChunk; ++k) sum += v[k];
  }
  flush_fp8_tally(p.in.scaling, in_tally);
  normalise_row(p, row, lane, sum);
}

struct BackwardParams {
  TensorRef din, dout, in, weight, mean, rstd;
  float* partials;  // [gridDim.x][2][c]: the block's dweight then dbias column sums
  int64_t rows;
  int c;
  bool vector;
  TensorRef dx;  // with kResidual: the branch's gradient, keep * din / (1-p), written as din is
  DropoutRule dropout;
};

template <bool kResidual>
__global__ void __launch_bounds__(kBackwardThreads) layernorm_backward_kernel(BackwardParams p) {
  float* dw_sum = dynamic_shared_memory<float>();  // [c], then db_sum [c]
  float* db_sum = dw_sum + p.c;
  const int chunks = (p.c + kChunk - 1) / kChunk;
  // Thread t owns the columns of chunks t, t + blockDim.x, ...: it alone touches their sums.
  for (int j = threadIdx.x; j < chunks; j += blockDim.x) {
    for (int k = 0; k < kChunk && j * kChunk + k < p.c; ++k) dw_sum[j * kChunk + k] = db_sum[j * kChunk + k] = 0.0f;
  }
  const float dout_scale_inv = read_scale_inv(p.dout), in_scale_inv = read_scale_inv(p.in);
  const float w_scale_inv = read_scale_inv(p.weight), din_scale_inv = read_scale_inv(p.din);
  const float din_scale = write_scale(p.din);
  Fp8Tally din_tally, dx_tally;
  Fp8Tally* din_t = p.din.scaling ? &din_tally : nullptr;
  Fp8Tally* dx_t = p.dx.scaling ? &dx_tally : nullptr;
  const float dx_scale = kResidual ? write_scale(p.dx) : 1.0f;
  float dy[kChunk], x[kChunk], w[kChunk], dx[kChunk];
  bool keep[kChunk];

  for (int64_t row = blockIdx.x; row < p.rows; row += gridDim.x) {
    const int64_t base = row * p.c;
    const float mean = load(p.mean, row, read_scale_inv(p.mean));
    const float rstd = load(p.rstd, row, read_scale_inv(p.rstd));
    float dn_part = 0.0f, dn_n_part = 0.0f;
    for (int j = threadIdx.x; j < chunks; j += blockDim.x) {
      const int n = min(kChunk, p.c - j * kChunk);
      load_chunk(p.dout, base + j * kChunk, n, p.vector, dy, dout_scale_inv);
      load_chunk(p.in, base + j * kChunk, n, p.vector, x, in_scale_inv);
      load_chunk(p.weight, j * kChunk, n, p.vector, w, w_scale_inv);
      for (int k = 0; k < n; ++k) {
        const float norm = (x[k] - mean) * rstd;
        const float dn = w[k] * dy[k];
        dn_part += dn;
        dn_n_part += dn * norm;
        dw_sum[j * kChunk + k] += dy[k] * norm;
        db_sum[j * kChunk + k] += dy[k];
      }
    }
    const float dn_mean = block_sum(dn_part) / p.c;
    const float dn_n_mean = block_sum(dn_n_part) / p.c;
    for (int j = threadIdx.x; j < chunks; j += blockDim.x) {
      const int n = min(kChunk, p.c - j * kChunk);
      load_chunk(p.dout, base + j * kChunk, n, p.vector, dy, dout_scale_inv);
      load_chunk(p.in, base + j * kChunk, n, p.vector, x, in_scale_inv);
      load_chunk(p.weight, j * kChunk, n, p.vector, w, w_scale_inv);
      load_chunk(p.din, base + j * kChunk, n, p.vector, dx, din_scale_inv);
      for (int k = 0; k < kChunk; ++k) {
        const float norm = (x[k] - mean) * rstd;
        dx[k] += (w[k] * dy[k] - dn_mean - norm * dn_n_mean) * rstd;
      }
      store_chunk(p.din, base + j * kChunk, n, p.vector, dx, din_scale, din_t);
      if constexpr (kResidual) {
        // The branch's gradient is taken from din as stored, as residual_backward reads it.
        load_chunk(p.din, base + j * kChunk, n, p.vector, dx, din_scale_inv);
        if (p.dropout.active) {
          dropout_keep(p.dropout, static_cast<uint64_t>(base + j * kChunk), keep);
          for (int k = 0; k < kChunk; ++k) dx[k] = keep[k] ? static_cast<float>(dx[k] * p.dropout.scale) : 0.0f;
        }
        store_chunk(p.dx, base + j * kChunk, n, p.vector, dx, dx_scale, dx_t);
      }
    }
  }
  flush_fp8_tally(p.din.scaling, din_tally);
  if constexpr (kResidual) flush_fp8_tally(p.dx.scaling, dx_tally);
  float* out = p.partials + static_cast<int64_t>(blockIdx.x) * 2 * p.c;
  for (int j = threadIdx.x; j < chunks; j += blockDim.x) {
    for (int k = 0; k < kChunk && j * kChunk + k < p.c; ++k) {
      out[j * kChunk + k] = dw_sum[j * kChunk + k];
      out[p.c + j * kChunk + k] = db_sum[j * kChunk + k];
    }
  }
}

// dweight[c] += sum_g partials[g][0][c], dbias[c] += sum_g partials[g][1][c], g in increasing order.
__global__ void __launch_bounds__(kBackwardThreads)
    layernorm_param_grads_kernel(TensorRef dweight, TensorRef dbias, const float* partials, int blocks, int c) {
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  Fp8Tally dw_tally, db_tally;
  if (col < c) {
    float dw = 0.0f, db = 0.0f;
    for (int g = 0; g < blocks; ++g) {
      dw += partials[static_cast<int64_t>(g) * 2 * c + col];
      db += partials[static_cast<int64_t>(g) * 2 * c + c + col];
    }
    store(dweight, col, load(dweight, col, read_scale_inv(dweight)) + dw, write_scale(dweight), true,
          dweight.scaling ? &dw_tally : nullptr);
    store(dbias, col, load(dbias, col, read_scale_inv(dbias)) + db, write_scale(dbias), true,
          dbias.scaling ? &db_tally : nullptr);
  }
  flush_fp8_tally(dweight.scaling, dw_tally);
  flush_fp8_tally(dbias.scaling, db_tally);
}

// The shared checks' {rows, channels}, the channels as the kernels' int.
std::pair<int64_t, int> rows_and_channels(const RowShape& s, const Tensor& in, const char* op) {
  GPT_CHECK(s.cols <= (int64_t{1} << 30), "{}: in {} has {} channels", op, in.shape_string(), s.cols);
  return {s.rows, static_cast<int>(s.cols)};
}

// Checks a forward's arguments and builds its parameters (vector: every tensor given in extra allows
// whole chunks too).
ForwardParams forward_params(const LayerNormForwardArgs& args, const char* op, std::initializer_list<const Tensor*> extra) {
  const auto [n, c] = rows_and_channels(check_layernorm_forward(args, op), args.in, op);
  check_row_formats(op, {&args.out, &args.mean, &args.rstd, &args.in, &args.weight, &args.bias});
  check_row_formats(op, extra);
  bool vector = chunk_aligned(args.out, c) && chunk_aligned(args.in, c) && chunk_aligned(args.weight, c) &&
                chunk_aligned(args.bias, c);
  for (const Tensor* t : extra) vector = vector && chunk_aligned(*t, c);
  return {tensor_ref(args.out),    tensor_ref(args.mean), tensor_ref(args.rstd), tensor_ref(args.in),
          tensor_ref(args.weight), tensor_ref(args.bias), n,                     c,
          args.eps,                vector};
}

dim3 forward_grid(int64_t rows, const char* op) {
  constexpr int kRowsPerBlock = kForwardThreads / 32;
  const int64_t blocks = (rows + kRowsPerBlock - 1) / kRowsPerBlock;
  GPT_CHECK(blocks <= 0x7FFFFFFF, "{}: {} rows are too many for one grid", op, rows);
  return dim3(static_cast<unsigned>(blocks));
}

// The backward's checks, grid and launches; dx and dropout are the fused residual backward's (dx empty
// without it).
void launch_backward(const LayerNormBackwardArgs& args, const Tensor& dx, const DropoutSpec& dropout, const char* op,
                     const DeviceContext& ctx) {
  const auto [n, c] = rows_and_channels(check_layernorm_backward(args, op), args.in, op);
  GPT_CHECK(dx.empty() || dx.numel() == args.in.numel(), "{}: residual.dx {} should match din {}", op, dx.shape_string(),
            args.din.shape_string());
  check_row_formats(op, {&args.din, &args.dweight, &args.dbias, &args.dout, &args.in, &args.weight, &args.mean,
                         &args.rstd, &dx});
  const DropoutRule rule = dropout_rule(dropout);
  if (n == 0) return;
  const size_t shared_bytes = 2 * static_cast<size_t>(c) * sizeof(float);
  GPT_CHECK(shared_bytes <= 48 * 1024,
            "{}: C = {} needs {} bytes of shared memory for its column sums, more than the 48 KiB a block gets "
            "without opting in (C <= 6144)",
            op, c, shared_bytes);
  const size_t partial_bytes = 2 * static_cast<size_t>(c) * sizeof(float);
  const int64_t fit = static_cast<int64_t>(ctx.scratch_bytes / partial_bytes);
  GPT_CHECK(fit >= 1, "{}: the {} bytes of scratch hold no partial sums of C = {} ({} bytes each)", op,
            ctx.scratch_bytes, c, partial_bytes);
  // A thread per chunk of the row (GPT-2's C = 768: 96 threads, no idle warps), and enough blocks for
  // about 1024 resident threads per SM; more would only multiply the partials to add up.
  const int threads = row_block_threads(c, kBackwardThreads);
  const int64_t per_sm = std::max(1, 1024 / threads);
  const int blocks = static_cast<int>(std::min<int64_t>({n, per_sm * std::max(ctx.sm_count, 1), fit}));
  const bool vector = chunk_aligned(args.din, c) && chunk_aligned(args.dout, c) && chunk_aligned(args.in, c) &&
                      chunk_aligned(args.weight, c) && chunk_aligned(dx, c);
  auto* partials = static_cast<float*>(ctx.scratch);
  const BackwardParams p{tensor_ref(args.din),  tensor_ref(args.dout), tensor_ref(args.in), tensor_ref(args.weight),
                         tensor_ref(args.mean), tensor_ref(args.rstd), partials,            n,
                         c,                     vector,                tensor_ref(dx),      rule};
  if (dx.empty()) launch<layernorm_backward_kernel<false>>(dim3(blocks), dim3(threads), shared_bytes, ctx.stream, p);
  else launch<layernorm_backward_kernel<true>>(dim3(blocks), dim3(threads), shared_bytes, ctx.stream, p);
  launch<layernorm_param_grads_kernel>(dim3((c + kBackwardThreads - 1) / kBackwardThreads), dim3(kBackwardThreads), 0,
                                       ctx.stream, tensor_ref(args.dweight), tensor_ref(args.dbias),
                                       static_cast<const float*>(partials), blocks, c);
}

}  // namespace

void layernorm_forward(const LayerNormForwardArgs& args, const DeviceContext& ctx) {
  const ForwardParams p = forward_params(args, "layernorm_forward", {});
  if (p.rows == 0) return;
  launch<layernorm_forward_kernel>(forward_grid(p.rows, "layernorm_forward"), dim3(kForwardThreads), 0, ctx.stream, p);
}

void residual_layernorm_forward(const ResidualLayerNormForwardArgs& args, const DeviceContext& ctx) {
  constexpr const char* kOp = "residual_layernorm_forward";
  check_fused_args(args);
  const ResidualForwardArgs& res = args.residual;
  GPT_CHECK(!res.residual.empty() && !res.x.empty(), "{}: residual.residual and residual.x must be given", kOp);
  GPT_CHECK(res.residual.numel() == res.out.numel() && res.x.numel() == res.out.numel(),
            "{}: residual {} and x {} should have the element count of out {}", kOp, res.residual.shape_string(),
            res.x.shape_string(), res.out.shape_string());
  const ForwardParams p = forward_params(args.norm, kOp, {&res.residual, &res.x});
  const ResidualParams r{tensor_ref(res.residual), tensor_ref(res.x), dropout_rule(res.dropout)};
  if (p.rows == 0) return;
  launch<residual_layernorm_forward_kernel>(forward_grid(p.rows, kOp), dim3(kForwardThreads), 0, ctx.stream, p, r);
}

void layernorm_backward(const LayerNormBackwardArgs& args, const DeviceContext& ctx) {
  launch_backward(args, Tensor(), DropoutSpec{}, "layernorm_backward", ctx);
}

void layernorm_residual_backward(const LayerNormResidualBackwardArgs& args, const DeviceContext& ctx) {
  check_fused_args(args);
  const Tensor& dx = args.residual.dx;
  GPT_CHECK(!dx.empty(), "layernorm_residual_backward: residual.dx must be given");
  if (!args.residual.dropout.active() && is_fp8(dx.dtype) && dx.dtype == args.norm.din.dtype &&
      dx.scaling == args.norm.din.scaling) {
    layernorm_backward(args.norm, ctx);
    residual_backward(args.residual, ctx);
    return;
  }
  launch_backward(args.norm, dx, args.residual.dropout, "layernorm_residual_backward", ctx);
}

}  // namespace gpt::cuda
