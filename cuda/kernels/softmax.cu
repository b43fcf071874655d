// Row-wise softmax over the last dimension D of a tensor seen as [N,D], as src/cpu/softmax.cpp:
//   forward:  out[j] = exp(in[j] - max) / sum_k exp(in[k] - max)
//   backward: din[j] = out[j] * (dout[j] - sum_k dout[k] out[k])
// One block per row, as many whole warps as the row has 8-element chunks (at most 256 threads); each
// thread walks its chunks (row_chunks.cuh: 128-bit accesses where the row allows, every tensor in its own
// format). The maximum and sums are block reductions in a fixed order (block_reduce.cuh),
// FP32 throughout, so the result is bitwise reproducible. Forward passes: max, sum of exponentials, then
// the output, recomputing each exponential rather than keeping it (no buffer). Every element is read by
// the thread that writes it, after the reductions' barriers, so out may alias in and din may alias dout
// or out, as on the CPU. Nothing is fused.
#include "kernels/softmax.h"

#include "backend/op_checks.h"
#include "common/block_reduce.cuh"
#include "common/cuda_check.h"
#include "common/launch.cuh"
#include "common/row_chunks.cuh"

namespace gpt::cuda {
namespace {

constexpr int kMaxThreads = 256;

__global__ void __launch_bounds__(kMaxThreads)
    softmax_forward_kernel(TensorRef out, TensorRef in, int64_t cols, bool vector) {
  const int64_t base = static_cast<int64_t>(blockIdx.x) * cols;
  const int64_t chunks = (cols + kChunk - 1) / kChunk;
  const float in_scale_inv = read_scale_inv(in);
  float x[kChunk];

  float row_max = -INFINITY;
  for (int64_t j = threadIdx.x; j < chunks; j += blockDim.x) {
    const int n = chunk_elements(cols, j);
    load_chunk(in, base + j * kChunk, n, vector, x, in_scale_inv);
    for (int k = 0; k < n; ++k) row_max = nan_max(row_max, x[k]);
  }
  row_max = block_max(row_max);

  float sum = 0.0f;
  for (int64_t j = threadIdx.x; j < chunks; j += blockDim.x) {
    const int n = chunk_elements(cols, j);
    load_chunk(in, base + j * kChunk, n, vector, x, in_scale_inv);
    for (int k = 0; k < n; ++k) sum += expf(x[k] - row_max);
  }
  const float inv_sum = 1.0f / block_sum(sum);

  const float out_scale = write_scale(out);
  Fp8Tally tally;
  for (int64_t j = threadIdx.x; j < chunks; j += blockDim.x) {
    const int n = chunk_elements(cols, j);
    load_chunk(in, base + j * kChunk, n, vector, x, in_scale_inv);
    for (int k = 0; k < kChunk; ++k) x[k] = expf(x[k] - row_max) * inv_sum;
    store_chunk(out, base + j * kChunk, n, vector, x, out_scale, out.scaling ? &tally : nullptr);
  }
  flush_fp8_tally(out.scaling, tally);
}

__global__ void __launch_bounds__(kMaxThreads)
    softmax_backward_kernel(TensorRef din, TensorRef dout, TensorRef out, int64_t cols, bool vector) {
  const int64_t base = static_cast<int64_t>(blockIdx.x) * cols;
  const int64_t chunks = (cols + kChunk - 1) / kChunk;
  const float dout_scale_inv = read_scale_inv(dout), out_scale_inv = read_scale_inv(out);
  float dy[kChunk], y[kChunk];

  float dot = 0.0f;
  for (int64_t j = threadIdx.x; j < chunks; j += blockDim.x) {
    const int n = chunk_elements(cols, j);
    load_chunk(dout, base + j * kChunk, n, vector, dy, dout_scale_inv);
    load_chunk(out, base + j * kChunk, n, vector, y, out_scale_inv);
    for (int k = 0; k < kChunk; ++k) dot += dy[k] * y[k];
  }
  dot = block_sum(dot);

  const float din_scale = write_scale(din);
  Fp8Tally tally;
  for (int64_t j = threadIdx.x; j < chunks; j += blockDim.x) {
    const int n = chunk_elements(cols, j);
    load_chunk(dout, base + j * kChunk, n, vector, dy, dout_scale_inv);
    load_chunk(out, base + j * kChunk, n, vector, y, out_scale_inv);
    for (int k = 0; k < kChunk; ++k) dy[k] = y[k] * (dy[k] - dot);
    store_chunk(din, base + j * kChunk, n, vector, dy, din_scale, din.scaling ? &tally : nullptr);
  }
  flush_fp8_tally(din.scaling, tally);
}

unsigned row_grid(const char* op, int64_t rows) {
  GPT_CHECK(rows <= 0x7FFFFFFF, "{}: {} rows are too many for one grid", op, rows);
  return static_cast<unsigned>(rows);
}

}  // namespace

void softmax_forward(const SoftmaxForwardArgs& args, const DeviceContext& ctx) {
  const auto [rows, cols] = check_softmax_forward(args);
  check_row_formats("softmax_forward", {&args.out, &args.in});
  if (rows == 0) return;
  const bool vector = chunk_aligned(args.out, cols) && chunk_aligned(args.in, cols);
  launch<softmax_forward_kernel>(dim3(row_grid("softmax_forward", rows)), dim3(row_block_threads(cols, kMaxThreads)), 0,
                                 ctx.stream, tensor_ref(args.out), tensor_ref(args.in), cols, vector);
}

void softmax_backward(const SoftmaxBackwardArgs& args, const DeviceContext& ctx) {
  const auto [rows, cols] = check_softmax_backward(args);
  check_row_formats("softmax_backward", {&args.din, &args.dout, &args.out});
  if (rows == 0) return;
  const bool vector = chunk_aligned(args.din, cols) && chunk_aligned(args.dout, cols) && chunk_aligned(args.out, cols);
  launch<softmax_backward_kernel>(dim3(row_grid("softmax_backward", rows)), dim3(row_block_threads(cols, kMaxThreads)),
                                  0, ctx.stream, tensor_ref(args.din), tensor_ref(args.dout), tensor_ref(args.out), cols,
                                  vector);
}

}  // namespace gpt::cuda
