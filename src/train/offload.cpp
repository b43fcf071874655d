#include "train/offload.h"

#include <spdlog/spdlog.h>

namespace gpt {

std::unique_ptr<AdamW> make_optimizer(const Config& config, GPT& model, const DataParallel& dp, Backend& backend,
                                      int threads, std::unique_ptr<Backend>& host_backend) {
  const ParameterLayout& layout = model.parameter_layout();
  if (config.memory.offload != "optimizer")
    return dp.zero_stage() == 1 ? std::make_unique<AdamW>(config.optim, layout, backend, dp.optimizer_ranges())
                                : std::make_unique<AdamW>(config.optim, layout, backend);
  Backend* host = &backend;
  if (!backend.capabilities().device_memory_is_host) {
    host_backend = make_backend(BackendKind::Cpu, {threads, false, AttentionKind::Materialised, -1});
    host = host_backend.get();
  }
  // The gradients the update reads: the gradient arena's (precision.grad_dtype), or under ZeRO-1 the
  // reduce-scattered shard, which is in the masters' format.
  const DType grad_dtype = dp.zero_stage() == 1 ? model.dtype() : model.gradient_arena().layout().buffer(0).dtype;
  auto optimizer = std::make_unique<AdamW>(config.optim, layout, backend, dp.optimizer_ranges(), *host, grad_dtype);
  const std::string bytes = fmt::format("{:.1f} MiB", static_cast<double>(optimizer->host_master_bytes() +
                                                                          optimizer->host_gradient_bytes()) / (1 << 20));
  if (optimizer->host_memory_pinned())
    spdlog::info("memory.offload: the FP32 masters and the gradients' host copy ({}) are in pinned host memory: "
                 "their copies run on the {} backend's copy stream beside backward and AdamW", bytes, backend.name());
  else if (backend.capabilities().device_memory_is_host)
    spdlog::info("memory.offload: the FP32 masters and the gradients' host copy ({}) are in ordinary memory: the {} "
                 "backend's device memory is the host's, so each transfer is a plain copy", bytes, backend.name());
  else
    spdlog::warn("memory.offload: the {} backend could not pin {} of host memory for the FP32 masters and the "
                 "gradients' copy; they are in ordinary memory, where each copy holds the host until it is done, "
                 "so the copies do not overlap backward", backend.name(), bytes);
  return optimizer;
}

}  // namespace gpt
