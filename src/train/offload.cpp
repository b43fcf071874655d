#include "train/offload.h"

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
  return std::make_unique<AdamW>(config.optim, layout, backend, dp.optimizer_ranges(), *host, grad_dtype);
}

}  // namespace gpt
