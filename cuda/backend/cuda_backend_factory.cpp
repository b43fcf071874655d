// train.backend cuda (or auto with a device present): the device of this process's local rank (the one
// the job's communicator found among its node's ranks, else the launcher's), logged with its name, memory
// and compute capability. A device this build cannot run on (backend/device_support.h) stops here, before
// anything is allocated on it; one it runs on slowly (Turing, for the bf16 recipe) is warned of.
#include "backend/cuda_backend.h"
#include "backend/cuda_entry.h"
#include "backend/device_support.h"

#include <spdlog/spdlog.h>

namespace gpt::cuda {

std::unique_ptr<Backend> make_backend(const BackendOptions& options) {
  const int count = device_count();
  GPT_CHECK(count > 0, "train.backend cuda, but no CUDA device is present ({}); use train.backend: cpu or auto",
            describe());
  const DeviceCheck check = check_device(local_device_index(count, options.local_rank));
  GPT_CHECK(check.support.runs(),
            "train.backend cuda, but {}. train.backend: cpu trains without it (and auto falls back to the CPU)",
            check.refusal());
  if (check.support.code == DeviceSupport::Code::CompiledAtFirstUse)
    spdlog::warn("backend cuda: {}: {}", check.device(), check.support.detail);
  auto backend = std::make_unique<CudaBackend>(check.index, options.allow_tf32, options.attention);
  const DeviceInfo& d = backend->info();
  spdlog::info("backend cuda: device {} of {}: {} ({:.1f} GiB, compute capability {}.{}, {} SMs){}", d.index, count,
               d.name, static_cast<double>(d.total_bytes) / (1ull << 30), d.compute_capability / 10,
               d.compute_capability % 10, d.sm_count, emulated() ? " on the CUDA emulator (cuda/emu)" : "");
  if (const std::string limits = check.limits(); !limits.empty()) spdlog::warn("backend cuda: {}", limits);
  if (options.attention == AttentionKind::Materialised)
    spdlog::info("train.attention materialised: attention keeps its [B,n_head,T,T] probabilities");
  if (options.allow_tf32) spdlog::info("precision.tf32: FP32 matrix products run on TF32 tensor cores");
  return backend;
}

}  // namespace gpt::cuda
