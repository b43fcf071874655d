// The CPU backend: the reference every other backend is checked against, and the default for a first
// run. Plain loops with FP32-or-better accumulation, OpenMP across rows, OpenBLAS for matrix products.
// Each op family lives in its own file (matmul.cpp, layernorm.cpp, ...).
#pragma once

#include "backend/backend.h"
#include "cpu/wide_operands.h"

namespace gpt::cpu {

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(int threads = 0);

  std::string name() const override { return "cpu"; }
  Device device() const override { return Device::CPU; }
  // Every op decodes narrow operands into FP32 staging and rounds a narrow output once (wide_operands.h).
  BackendCapabilities capabilities() const override {
    BackendCapabilities caps;
    caps.products_of_any_formats = true;
    return caps;
  }
  int threads() const { return threads_; }

  void* allocate(size_t bytes) override;
  void deallocate(void* ptr) override;
  void copy_to_device(void* dst, const void* host_src, size_t bytes) override;
  void copy_to_host(void* host_dst, const void* src, size_t bytes) override;
  void synchronize() override {}

  GPT_BACKEND_OPS(GPT_OVERRIDE_BACKEND_OP)

  // Bytes of FP32 staging the narrow operands have needed so far (see wide_operands.h).
  size_t staging_bytes() const { return staging_.bytes(); }

 private:
  int threads_;
  StagingPool staging_;
};

}  // namespace gpt::cpu
