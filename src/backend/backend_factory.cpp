#include "backend/backend.h"
#include "backend/cuda_entry.h"
#include "cpu/cpu_backend.h"
#include "dist/communicator.h"

#include <spdlog/spdlog.h>

namespace gpt {

std::unique_ptr<Communicator> HostMemoryBackend::make_communicator(Communicator&) { return nullptr; }

BackendKind parse_backend_kind(const std::string& name) {
  if (name == "auto") return BackendKind::Auto;
  if (name == "cpu") return BackendKind::Cpu;
  if (name == "cuda") return BackendKind::Cuda;
  GPT_FAIL("unknown backend '{}': expected auto, cpu or cuda", name);
}

AttentionKind parse_attention_kind(const std::string& name) {
  if (name == "fused") return AttentionKind::Fused;
  if (name == "materialised") return AttentionKind::Materialised;
  GPT_FAIL("unknown train.attention '{}': expected fused or materialised", name);
}

std::unique_ptr<Backend> make_backend(BackendKind kind, const BackendOptions& options) {
  const int threads = options.threads;
  switch (kind) {
    case BackendKind::Cpu:
      return std::make_unique<cpu::CpuBackend>(threads, cpu::kNarrowMatmulWorkspaceBytes, options.cpu_exact_narrow_matmul);
    case BackendKind::Cuda:
      return cuda::make_backend(options);
    case BackendKind::Auto:
      if (!cuda::built_with_cuda()) {
        spdlog::info("train.backend auto: the CPU, since this gpt-train was built without CUDA (no nvcc at build "
                     "time, or GPT_CUDA=OFF)");
      } else if (cuda::device_count() == 0) {
        spdlog::info("train.backend auto: the CPU, since no CUDA device is visible ({})", cuda::describe());
      } else if (const std::string why = cuda::unusable_device_reason(options); !why.empty()) {
        // A GPU is there but cannot be used: worth a warning, since the user may expect it to train.
        spdlog::warn("train.backend auto: the CPU, since {}", why);
      } else {
        return cuda::make_backend(options);
      }
      return std::make_unique<cpu::CpuBackend>(threads, cpu::kNarrowMatmulWorkspaceBytes, options.cpu_exact_narrow_matmul);
  }
  GPT_FAIL("unreachable backend kind");
}

}  // namespace gpt
