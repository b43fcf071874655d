// The CUDA backend's matrix products, through cuBLASLt: Gemm owns the handle, the one workspace and the
// algorithm chosen per shape (cached), and runs MatmulArgs products for every format the backend stores.
#pragma once

#include "backend/op_args.h"
#include "common/cuda_api.h"

#include <cstddef>
#include <memory>

namespace gpt::cuda {

class Gemm {
 public:
  // compute_capability: major * 10 + minor of the device the products run on.
  explicit Gemm(int compute_capability);
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  // out = alpha op(a) op(b) + beta out + bias, as MatmulArgs says (row-major, leading dimensions folded).
  void matmul(const MatmulArgs& args, cudaStream_t stream);

  // Device bytes this object holds (the workspace): what the memory plan adds for the backend.
  size_t device_bytes() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace gpt::cuda
