// CUDA_CHECK / CUBLAS_CHECK: name the failed statement, file, line and the library's own message.
#pragma once

#include "core/error.h"

#include "common/cuda_api.h"
#include "gemm/cublaslt_api.h"

#define CUDA_CHECK(stmt)                                                                              \
  do {                                                                                                \
    cudaError_t gpt_cuda_status_ = (stmt);                                                            \
    if (gpt_cuda_status_ != cudaSuccess)                                                              \
      ::gpt::throw_error(__FILE__, __LINE__, fmt::format("CUDA error in {}: {}", #stmt,               \
                                                         cudaGetErrorString(gpt_cuda_status_)));      \
  } while (0)

#define CUBLAS_CHECK(stmt)                                                                            \
  do {                                                                                                \
    cublasStatus_t gpt_cublas_status_ = (stmt);                                                       \
    if (gpt_cublas_status_ != CUBLAS_STATUS_SUCCESS)                                                  \
      ::gpt::throw_error(__FILE__, __LINE__, fmt::format("cuBLAS error in {}: status {}", #stmt,      \
                                                         static_cast<int>(gpt_cublas_status_)));      \
  } while (0)
