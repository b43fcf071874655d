// What every op of the CUDA backend gets besides its arguments: the stream it runs on, the matrix-product
// engine (cuBLASLt handle, workspace, algorithm cache), a scratch buffer reserved once, and the device's
// limits. The backend owns all of it; an op allocates nothing.
#pragma once

#include "common/cuda_api.h"

#include <cstddef>

namespace gpt::cuda {

class Gemm;  // gemm/matmul.h

// The first bad token id and the first bad target the kernels met, recorded on the device so that no op
// waits for the host: each word is (position << 32) | the value's 32 bits, all ones when none; atomicMin
// keeps the lowest position. The bounds are the ones broken (wte's rows, the vocabulary). The backend
// reads the record with its next copy to the host, which waits for the stream anyway
// (common/input_errors.cuh records, cuda_backend.cpp reports).
struct InputErrors {
  unsigned long long first_token = ~0ull;
  unsigned long long first_target = ~0ull;
  unsigned long long token_bound = 0;
  unsigned long long target_bound = 0;
};

struct DeviceContext {
  cudaStream_t stream = nullptr;
  Gemm* gemm = nullptr;
  // Working memory for ops that need more than their arguments (the embedding backward's token buckets,
  // partial sums of reductions), reserved once at scratch_bytes; an op checks that it fits.
  void* scratch = nullptr;
  size_t scratch_bytes = 0;
  int sm_count = 0;
  int compute_capability = 0;  // major * 10 + minor: 90 on Hopper
  // The most shared memory one block may have (cudaDeviceProp::sharedMemPerBlockOptin): 227 KiB on
  // Hopper, 163 KiB on the A100, 99 KiB on Ampere and Ada consumer cards, 64 KiB on Turing. Kernels whose
  // tiles do not fit take a path that needs less; 0 (unknown) fits none of them.
  size_t shared_per_block_optin = 0;
  InputErrors* input_errors = nullptr;  // null: bad inputs are not recorded (the kernel tests' contexts)
};

}  // namespace gpt::cuda
