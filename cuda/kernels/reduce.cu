// Deterministic reductions (src/cpu/reduce.cpp and the bias_backward of src/cpu/matmul.cpp are the
// references). No float atomics: every sum has one order, fixed by the shapes alone (not by the GPU's
// SM count or the order blocks run in), so the same call gives the same bits on every run and every GPU.
//
// sum_of_squares: out[0] = sum_i in[i]^2, the squared global gradient norm. Each term is the FP32 value
// (FP8 times its scale_inv, as the CPU decodes it) squared in double, as the CPU does. Pass 1: G blocks
// (G from n alone, at most kMaxBlocks) of kThreads threads; a thread sums its grid-stride units of 8
// elements in double, the block adds its threads with block_reduce (shuffle butterfly, then warps in
// order) and writes one double partial to ctx.scratch. Pass 2: one block adds the G partials in a fixed
// order and stores out[0] (f32 or f64). Double accumulation, so the norm matches the CPU's (also double)
// to the last FP32 bit in practice; the two differ only in the order of the double additions.
//
// bias_backward: dbias[j] += sum_i dout[i, j] over dout [M, N] (leading dimensions folded into rows).
// Pass 1: a grid of (column tiles of 32 x 8 columns) x (row splits of R consecutive rows); thread (x, y)
// owns 8 adjacent columns (one 128-bit access of a 2-byte format when N % 8 == 0 and the pointer is
// aligned; scalar otherwise) and sums rows y, y+8, ... of the split in FP32; the 8 row lanes of the block
// are added in order (lane 0 first) in double and the split's column sums written to ctx.scratch as
// doubles [split, N]. Pass 2: a thread per column adds the splits in order (split 0 first) in double and
// stores dbias[j] = dbias[j] + total, one rounding to FP32 and one to dbias's format, as the CPU's double
// accumulator ends. R = 128 rows (16 per thread in FP32), more when the scratch cannot hold the splits.
//
// Formats: in/dout F32, BF16, F16, E4M3, E5M2 (FP8 times its scale_inv); sum_of_squares also reads F64
// (exactly, in double). dbias any of those but F64; out f32 or f64.
#include "kernels/reduce.h"

#include "backend/op_checks.h"
#include "common/block_reduce.cuh"
#include "common/launch.cuh"
#include "common/vector_access.cuh"

#include <algorithm>

namespace gpt::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxBlocks = 1024;
// Elements a pass-1 block of sum_of_squares covers before the grid grows by one block.
constexpr int64_t kElementsPerBlock = int64_t{kThreads} * kPack * 4;

__global__ void __launch_bounds__(kThreads)
    sum_of_squares_partials(TensorRef in, int64_t n, bool vector, double* partials) {
  const bool wide = in.dtype == DType::F64;
  const float scale_inv = read_scale_inv(in);
  double acc = 0.0;
  for (int64_t i = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) * kPack; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x * kPack) {
    const int count = static_cast<int>(std::min<int64_t>(kPack, n - i));
    double x[kPack];
    if (wide) {
      if (vector && count == kPack) load_pack(in, i, x);
      else for (int k = 0; k < kPack; ++k) x[k] = k < count ? static_cast<const double*>(in.data)[i + k] : 0.0;
    } else {
      float f[kPack];
      load_values(in, i, count, vector, f, scale_inv);
      for (int k = 0; k < kPack; ++k) x[k] = f[k];
    }
    for (int k = 0; k < kPack; ++k) acc += x[k] * x[k];
  }
  acc = block_reduce(acc, SumOp{}, 0.0);
  if (threadIdx.x == 0) partials[blockIdx.x] = acc;
}

__global__ void __launch_bounds__(kThreads) sum_of_squares_total(const double* partials, int blocks, TensorRef out) {
  double acc = 0.0;
  for (int b = threadIdx.x; b < blocks; b += blockDim.x) acc += partials[b];
  acc = block_reduce(acc, SumOp{}, 0.0);
  if (threadIdx.x != 0) return;
  if (out.dtype == DType::F64) *static_cast<double*>(out.data) = acc;
  else *static_cast<float*>(out.data) = static_cast<float>(acc);
}

// Bias backward pass 1: blockDim (32, 8); blockIdx.x the column tile, blockIdx.y the row split.
constexpr int kColumnThreads = 32;
constexpr int kRowLanes = 8;
constexpr int kTileColumns = kColumnThreads * kPack;
constexpr int64_t kRowsPerSplit = 128;

__global__ void __launch_bounds__(kColumnThreads * kRowLanes)
    bias_backward_partials(TensorRef dout, int64_t m, int64_t n, int64_t rows_per_split, bool vector, double* partials) {
  __shared__ float lanes[kRowLanes][kTileColumns];
  const float scale_inv = read_scale_inv(dout);
  const int64_t column0 = static_cast<int64_t>(blockIdx.x) * kTileColumns + threadIdx.x * kPack;
  const int count = static_cast<int>(std::clamp<int64_t>(n - column0, 0, kPack));
  const int64_t row_begin = static_cast<int64_t>(blockIdx.y) * rows_per_split;
  const int64_t row_end = std::min(m, row_begin + rows_per_split);
  float acc[kPack] = {};
  if (count > 0) {
    for (int64_t r = row_begin + threadIdx.y; r < row_end; r += kRowLanes) {
      float v[kPack];
      load_values(dout, r * n + column0, count, vector, v, scale_inv);
      for (int k = 0; k < kPack; ++k) acc[k] += v[k];
    }
  }
  for (int k = 0; k < kPack; ++k) lanes[threadIdx.y][threadIdx.x * kPack + k] = acc[k];
  __syncthreads();
  // The tile's 256 columns, one per thread of the block, each adding the 8 row lanes in order.
  const int t = threadIdx.y * kColumnThreads + threadIdx.x;
  const int64_t column = static_cast<int64_t>(blockIdx.x) * kTileColumns + t;
  if (column >= n) return;
  double sum = 0.0;
  for (int lane = 0; lane < kRowLanes; ++lane) sum += lanes[lane][t];
  partials[static_cast<int64_t>(blockIdx.y) * n + column] = sum;
}

__global__ void __launch_bounds__(kThreads)
    bias_backward_total(const double* partials, int64_t splits, int64_t n, TensorRef dbias) {
  const float scale_inv = read_scale_inv(dbias), scale = write_scale(dbias);
  Fp8Tally tally;
  Fp8Tally* dbias_tally = tally_of(dbias, tally);
  for (int64_t j = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; j < n;
       j += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    double total = 0.0;
    for (int64_t s = 0; s < splits; ++s) total += partials[s * n + j];
    const float old = load(dbias, j, scale_inv);
    store(dbias, j, static_cast<float>(old + total), scale, true, dbias_tally);
  }
  flush_fp8_tally(dbias_tally ? dbias.scaling : nullptr, tally);
}

void check_format(const Tensor& t, const char* op, const char* name, bool f64_allowed) {
  GPT_CHECK(t.dtype == DType::F32 || is_narrow_float(t.dtype) || (f64_allowed && t.dtype == DType::F64),
            "{}: {} is {}; the CUDA backend takes f32, bf16, f16, e4m3 or e5m2{} here", op, name, dtype_name(t.dtype),
            f64_allowed ? " or f64" : " (f64 is the CPU's gradient-check format)");
}

}  // namespace

void sum_of_squares(const SumOfSquaresArgs& args, const DeviceContext& ctx) {
  check_sum_of_squares(args);
  GPT_CHECK(args.out.dtype == DType::F32 || args.out.dtype == DType::F64, "sum_of_squares: out must be f32 or f64, got {}",
            dtype_name(args.out.dtype));
  check_format(args.in, "sum_of_squares", "in", true);
  const int64_t n = args.in.numel();
  const int blocks = static_cast<int>(std::clamp<int64_t>((n + kElementsPerBlock - 1) / kElementsPerBlock, 1, kMaxBlocks));
  GPT_CHECK(blocks * sizeof(double) <= ctx.scratch_bytes, "sum_of_squares: {} partial sums need {} bytes of scratch, the backend has {}",
            blocks, blocks * sizeof(double), ctx.scratch_bytes);
  auto* partials = static_cast<double*>(ctx.scratch);
  launch<sum_of_squares_partials>(dim3(blocks), dim3(kThreads), 0, ctx.stream, tensor_ref(args.in), n,
                                  pack_aligned(args.in), partials);
  launch<sum_of_squares_total>(dim3(1), dim3(kThreads), 0, ctx.stream, static_cast<const double*>(partials), blocks,
                               tensor_ref(args.out));
}

void bias_backward(const BiasBackwardArgs& args, const DeviceContext& ctx) {
  const int64_t n = check_bias_backward(args);
  GPT_CHECK(n > 0, "bias_backward: dout {} has no columns", args.dout.shape_string());
  check_format(args.dbias, "bias_backward", "dbias", false);
  check_format(args.dout, "bias_backward", "dout", false);
  const int64_t m = args.dout.numel() / n;
  // Splits of kRowsPerSplit rows, fewer (and longer) when their partial sums would not fit the scratch.
  const int64_t max_splits = static_cast<int64_t>(ctx.scratch_bytes / (sizeof(double) * static_cast<size_t>(n)));
  GPT_CHECK(max_splits >= 1, "bias_backward: {} columns need {} bytes of scratch, the backend has {}", n,
            n * sizeof(double), ctx.scratch_bytes);
  const int64_t splits = std::clamp<int64_t>((m + kRowsPerSplit - 1) / kRowsPerSplit, 1, std::min<int64_t>(max_splits, 65535));
  const int64_t rows_per_split = (m + splits - 1) / splits;
  const int64_t tiles = (n + kTileColumns - 1) / kTileColumns;
  GPT_CHECK(tiles <= 0x7FFFFFFF, "bias_backward: {} columns are too many for one grid", n);
  auto* partials = static_cast<double*>(ctx.scratch);
  const bool vector = n % kPack == 0 && pack_aligned(args.dout);
  launch<bias_backward_partials>(dim3(static_cast<unsigned>(tiles), static_cast<unsigned>(splits)),
                                 dim3(kColumnThreads, kRowLanes), 0, ctx.stream, tensor_ref(args.dout), m, n,
                                 rows_per_split, vector, partials);
  const int total_blocks = static_cast<int>(std::clamp<int64_t>((n + kThreads - 1) / kThreads, 1, 65535));
  launch<bias_backward_total>(dim3(total_blocks), dim3(kThreads), 0, ctx.stream, static_cast<const double*>(partials),
                              splits, n, tensor_ref(args.dbias));
}

}  // namespace gpt::cuda
