// The CUDA backend's matrix products, through cuBLASLt: Gemm owns the handle, the one workspace and the
// algorithm chosen per shape (cached), and runs MatmulArgs products for every format combination the
// model's recipes pass, plus the strided-batched products of the materialised attention.
#pragma once

#include "backend/op_args.h"
#include "common/cuda_api.h"

#include <cstddef>
#include <cstdint>
#include <memory>

namespace gpt::cuda {

// A row-major matrix, or a strided batch of them: element (i, j) of batch z is
// data[z * batch_stride + i * ld + j] (in elements of dtype). rows and cols are as stored.
struct MatrixView {
  void* data = nullptr;
  DType dtype = DType::F32;
  int64_t rows = 0, cols = 0, ld = 0;
  int64_t batch_stride = 0;
};

// out[z] = alpha op(a[z]) op(b[z]) + beta out[z] for z < batch, with MatmulArgs' meaning of the
// transposes; F32, BF16 and F16 operands (no FP8, no bias).
struct BatchedMatmul {
  MatrixView out, a, b;
  bool trans_a = false;
  bool trans_b = false;
  float alpha = 1.0f;
  float beta = 0.0f;
  int batch = 1;
};

class Gemm {
 public:
  // compute_capability: major * 10 + minor of the device the products run on.
  explicit Gemm(int compute_capability);
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  // out = alpha op(a) op(b) + beta out + bias, as MatmulArgs says (row-major, leading dimensions folded).
  void matmul(const MatmulArgs& args, cudaStream_t stream);

  // The strided-batched product (the attention's per-head products).
  void batched_matmul(const BatchedMatmul& product, cudaStream_t stream);

  // F32 products on TF32 tensor cores (CUBLAS_COMPUTE_32F_FAST_TF32) when allowed; off by default,
  // so F32 products are FP32 products.
  void set_allow_tf32(bool allow);

  // Device bytes this object holds (cuBLASLt's workspace and the device-side alpha and beta): what the
  // memory plan adds for the backend. FP8 operand copies go to MatmulArgs::staging, which the plan holds.
  size_t device_bytes() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace gpt::cuda
