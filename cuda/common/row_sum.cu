// Row sums of an FP32 matrix: out[r] = sum_c x[r, c], x row-major (rows x cols).
// One block of kThreads threads per row: each thread sums a strided slice of the row, then block_sum
// adds the threads' partials (warp butterflies, then the warps in order). Nothing is fused. The building
// block of every row reduction of the backend, and the kernel that runs in both builds' CI: nvcc compiles
// it for each architecture, the emulator runs it in tests/cuda/test_row_sum.cpp.
#include "common/row_sum.h"

#include "common/block_reduce.cuh"
#include "common/launch.cuh"

namespace gpt::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads)
    row_sum_kernel(const float* __restrict__ x, float* __restrict__ out, int cols) {
  const float* row = x + static_cast<size_t>(blockIdx.x) * cols;
  float acc = 0.0f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) acc += row[c];
  const float total = block_sum(acc);
  if (threadIdx.x == 0) out[blockIdx.x] = total;
}

}  // namespace

void row_sum(const float* x, float* out, int rows, int cols, cudaStream_t stream) {
  GPT_CHECK(rows > 0 && cols > 0, "row_sum: {} x {} is not a matrix", rows, cols);
  launch<row_sum_kernel>(dim3(rows), dim3(kThreads), 0, stream, x, out, cols);
}

}  // namespace gpt::cuda
