// What every op of the CUDA backend gets besides its arguments: the stream it runs on, the matrix-product
// engine (cuBLASLt handle, workspace, algorithm cache), a scratch buffer reserved once, and the device's
// limits. The backend owns all of it; an op allocates nothing.
#pragma once

#include "common/cuda_api.h"

#include <cstddef>

namespace gpt::cuda {

class Gemm;  // gemm/matmul.h

struct DeviceContext {
  cudaStream_t stream = nullptr;
  Gemm* gemm = nullptr;
  // Working memory for ops that need more than their arguments (the embedding backward's token buckets,
  // partial sums of reductions), reserved once at scratch_bytes; an op checks that it fits.
  void* scratch = nullptr;
  size_t scratch_bytes = 0;
  int sm_count = 0;
  int compute_capability = 0;  // major * 10 + minor: 90 on Hopper
};

}  // namespace gpt::cuda
