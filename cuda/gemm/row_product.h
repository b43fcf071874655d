// Matrix products of a few rows in any pair of operand formats, by a hand-written kernel (math and layout
// in row_product.cu): what cuBLASLt cannot take, above all the KV-cache decoder's one-row products of mixed
// formats (F32 probabilities times BF16 values, an FP8 activation row without a 16-multiple shape).
#pragma once

#include "backend/op_args.h"
#include "common/cuda_api.h"

#include <cstdint>

namespace gpt::cuda {

// The most rows (op(a)'s M) Gemm sends to row_product: each output element is one warp's dot product
// over K, which suits a decoder's handful of rows and not a training batch's thousands.
constexpr int64_t kRowProductMaxRows = 16;

// out[M,N] = alpha op(a) op(b) + beta out + bias, with MatmulArgs' meaning of every field, for operands,
// out and bias each of F32, BF16, F16, E4M3 or E5M2 (FP8 read through its scale_inv, an FP8 out stored
// with its scale and statistics); m, n, k as Gemm::matmul derived them. MatmulArgs::staging is not used.
void row_product(const MatmulArgs& args, int64_t m, int64_t n, int64_t k, cudaStream_t stream);

}  // namespace gpt::cuda
