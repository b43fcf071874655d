// The CPU backend: the reference every other backend is checked against, and the default for a first
// run. Plain loops with FP32-or-better accumulation, OpenMP across rows, OpenBLAS for matrix products.
// Each op family lives in its own file (matmul.cpp, layernorm.cpp, ...).
#pragma once

#include "backend/backend.h"

namespace gpt::cpu {

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(int threads = 0);

  std::string name() const override { return "cpu"; }
  Device device() const override { return Device::CPU; }
  int threads() const { return threads_; }

  void* allocate(size_t bytes) override;
  void deallocate(void* ptr) override;
  void copy_to_device(void* dst, const void* host_src, size_t bytes) override;
  void copy_to_host(void* host_dst, const void* src, size_t bytes) override;
  void synchronize() override {}

  void fill(const FillArgs& args) override;
  void copy(const CopyArgs& args) override;
  void matmul(const MatmulArgs& args) override;
  void bias_backward(const BiasBackwardArgs& args) override;
  void layernorm_forward(const LayerNormForwardArgs& args) override;
  void layernorm_backward(const LayerNormBackwardArgs& args) override;
  void attention_forward(const AttentionForwardArgs& args) override;
  void attention_backward(const AttentionBackwardArgs& args) override;
  void softmax_forward(const SoftmaxForwardArgs& args) override;
  void softmax_backward(const SoftmaxBackwardArgs& args) override;
  void gelu_forward(const GeluForwardArgs& args) override;
  void gelu_backward(const GeluBackwardArgs& args) override;
  void residual_forward(const ResidualForwardArgs& args) override;
  void residual_backward(const ResidualBackwardArgs& args) override;
  void embedding_forward(const EmbeddingForwardArgs& args) override;
  void embedding_backward(const EmbeddingBackwardArgs& args) override;
  void cross_entropy(const CrossEntropyArgs& args) override;
  void adamw_update(const AdamWArgs& args) override;
  void sum_of_squares(const SumOfSquaresArgs& args) override;
  void cast(const CastArgs& args) override;
  void amax(const AmaxArgs& args) override;
  void quantize_roundtrip(const QuantizeRoundtripArgs& args) override;

 private:
  int threads_;
};

}  // namespace gpt::cpu
