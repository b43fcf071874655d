// The CPU backend: the reference every other backend is checked against, and the default for a first
// run. Plain loops with FP32-or-better accumulation, OpenMP across rows, OpenBLAS for matrix products.
// Each op family lives in its own file (matmul.cpp, layernorm.cpp, ...).
#pragma once

#include "backend/backend.h"
#include "cpu/narrow_matmul.h"
#include "cpu/onednn_matmul.h"
#include "cpu/wide_operands.h"

#include <memory>

namespace gpt::cpu {

// The narrow products' workspace (narrow_matmul.h). 16 MiB holds every product of a GPT-2 124M block at B4
// T64 whole (the largest, fc and fc proj, need 13.4 MB as FP32), so only the LM head's three products are
// tiled; the demo's all fit.
constexpr size_t kNarrowMatmulWorkspaceBytes = size_t{16} << 20;

class CpuBackend final : public HostMemoryBackend {
 public:
  // exact_narrow_matmul: narrow products always decode to FP32 for OpenBLAS (the exact emulation), never
  // oneDNN's BF16 matmul, even where the CPU multiplies BF16 natively (precision.cpu_narrow_matmul).
  explicit CpuBackend(int threads = 0, size_t narrow_matmul_workspace_bytes = kNarrowMatmulWorkspaceBytes,
                      bool exact_narrow_matmul = false);
  ~CpuBackend() override;

  std::string name() const override { return "cpu"; }
  Device device() const override { return Device::CPU; }
  int threads() const { return threads_; }

  void* allocate(size_t bytes) override;
  void deallocate(void* ptr) override;
  void copy_to_device(void* dst, const void* host_src, size_t bytes) override;
  void copy_to_host(void* host_dst, const void* src, size_t bytes) override;
  void synchronize() override {}
  // Every op decodes narrow operands into FP32 staging and rounds a narrow output once (wide_operands.h), so
  // products take any operand formats.
  BackendCapabilities capabilities() const override;
  // The narrow products' workspace once a narrow product has run (0 before).
  size_t workspace_bytes() const override { return matmul_workspace_.held_bytes(); }

  GPT_BACKEND_OPS(GPT_OVERRIDE_BACKEND_OP)

  // Bytes of FP32 staging the narrow operands have needed so far (see wide_operands.h).
  size_t staging_bytes() const { return staging_.bytes(); }

 private:
  int threads_;
  StagingPool staging_;
  MatmulWorkspace matmul_workspace_;
  std::unique_ptr<OnednnMatmul> onednn_;  // where the CPU multiplies BF16 natively and not exact, else null
};

}  // namespace gpt::cpu
