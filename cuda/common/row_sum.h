// Host entry of cuda/common/row_sum.cu.
#pragma once

#include "common/cuda_api.h"

namespace gpt::cuda {

// out[r] = sum over c of x[r * cols + c], for FP32 rows; one block per row, FP32 accumulation.
void row_sum(const float* x, float* out, int rows, int cols, cudaStream_t stream);

}  // namespace gpt::cuda
