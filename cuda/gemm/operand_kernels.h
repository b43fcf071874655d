// The small kernels around Gemm's cuBLASLt products (math and layout in operand_kernels.cu): FP8
// transposes for Hopper's TN rule, FP8 codes widened to a 16-bit format for products with one FP8
// operand, the device-side alpha that carries FP8 inverse scales, and a bias pass.
#pragma once

#include "common/cuda_api.h"
#include "core/tensor.h"

#include <cstdint>

namespace gpt::cuda {

// out[c, r] = in[r, c] for a row-major [rows, cols] matrix of 1-byte elements with leading dimension
// ld_in; out is [cols, ld_out] (ld_out >= rows), its columns rows..ld_out-1 zero.
void transpose_bytes(void* out, int64_t ld_out, const void* in, int64_t rows, int64_t cols, int64_t ld_in,
                     cudaStream_t stream);

// out[r, c] = the FP8 code in[r, c] (E4M3 or E5M2, unscaled) in out_dtype (BF16 or F16), which holds
// every such code exactly; out is contiguous [rows, cols], in has leading dimension ld_in.
void widen_fp8(void* out, DType out_dtype, const void* in, DType in_dtype, int64_t rows, int64_t cols, int64_t ld_in,
               cudaStream_t stream);

// scalars[0] = alpha * (a_scale_inv ? *a_scale_inv : 1) * (b_scale_inv ? *b_scale_inv : 1),
// scalars[1] = beta: the alpha and beta of a product in CUBLASLT_POINTER_MODE_DEVICE.
void fold_scales(float* scalars, float alpha, float beta, const float* a_scale_inv, const float* b_scale_inv,
                 cudaStream_t stream);

// out[i, j] += bias[j] for an F32 out [rows, cols] (leading dimension ld) and a bias of any float format.
void add_bias(float* out, int64_t rows, int64_t cols, int64_t ld, const Tensor& bias, cudaStream_t stream);

}  // namespace gpt::cuda
