#include "train/offload.h"

#include "memory/recompute.h"

#include <spdlog/spdlog.h>

namespace gpt {

Backend& offload_host(Backend& backend, int threads, std::unique_ptr<Backend>& host_backend) {
  if (backend.capabilities().device_memory_is_host) return backend;
  if (!host_backend) host_backend = make_backend(BackendKind::Cpu, {threads, false, AttentionKind::Materialised, -1});
  return *host_backend;
}

std::unique_ptr<AdamW> make_optimizer(const Config& config, GPT& model, const DataParallel& dp, Backend& backend,
                                      int threads, std::unique_ptr<Backend>& host_backend) {
  const ParameterLayout& layout = model.parameter_layout();
  if (config.memory.offload != "optimizer" && dp.zero_stage() == 1)
    return std::make_unique<AdamW>(config.optim, layout, backend, dp.optimizer_ranges());
  if (config.memory.offload != "optimizer") {
    // One pass over the masters: the update writes the compute copy the next forward would cast.
    auto optimizer = std::make_unique<AdamW>(config.optim, layout, backend);
    if (std::vector<ComputeCopySlice> slices = model.compute_copy_slices(); !slices.empty())
      optimizer->write_compute_copy(std::move(slices));
    return optimizer;
  }
  Backend& host = offload_host(backend, threads, host_backend);
  // The gradients the update reads: the gradient arena's (precision.grad_dtype), or under ZeRO-1 the
  // reduce-scattered shard, which is in the masters' format.
  const DType grad_dtype = dp.zero_stage() == 1 ? model.dtype() : model.gradient_arena().layout().buffer(0).dtype;
  const OffloadMasters masters = model.masters_on_host() ? OffloadMasters::InParameters : OffloadMasters::HostCopy;
  auto optimizer =
      std::make_unique<AdamW>(config.optim, layout, backend, dp.optimizer_ranges(), host, grad_dtype, masters);
  if (model.masters_on_host()) {
    // Owning every tensor, the update writes the compute copy (in bf16/fp16: its host twin on a GPU) and
    // each block's part goes to the device as soon as it is written; under fp8, or over a shard, the next
    // forward casts the copy from the masters.
    std::vector<ComputeCopySlice> slices = model.compute_copy_slices();
    if (dp.zero_stage() == 0 && !slices.empty()) {
      optimizer->write_compute_copy(std::move(slices));
      optimizer->on_masters_updated([&model](int block) { model.compute_part_written(block); });
    }
    const char* how = model.host_compute_arena()
                          ? "the host writes their compute copy, which crosses the bus in the compute format"
                      : model.master_staging_arena() ? "the device casts its compute copy from them through a staging buffer"
                                                     : "the compute copy is cast from them where they are";
    spdlog::info("memory.offload: the FP32 masters ({}) are only in host memory, where AdamW updates {}; {}",
                 format_bytes(layout.arena_layout().total_bytes()),
                 dp.zero_stage() == 1 ? "this rank's shard of them (the gradient buckets gather the others')" : "them",
                 how);
  }
  // What crosses the bus: the weights (the compute copy's host twin, the model's FP32 masters kept on the
  // host, or AdamW's copy of the device's) and the gradients' host copy.
  const size_t master_bytes =
      (model.masters_on_host() ? layout.arena_layout().total_bytes() : optimizer->host_master_bytes()) +
      (model.host_compute_arena() ? model.host_compute_arena()->layout().total_bytes() : 0);
  const std::string bytes =
      fmt::format("{:.1f} MiB", static_cast<double>(master_bytes + optimizer->host_gradient_bytes()) / (1 << 20));
  const char* what = model.host_compute_arena() ? "the FP32 masters, the compute copy's host twin and the gradients' host copy"
                                                : "the FP32 masters and the gradients' host copy";
  if (optimizer->host_memory_pinned() && (!model.masters_on_host() || model.masters_pinned()))
    spdlog::info("memory.offload: {} ({}) in pinned host memory: the copies run on the {} backend's copy stream "
                 "beside backward and AdamW", what, bytes, backend.name());
  else if (backend.capabilities().device_memory_is_host)
    spdlog::info("memory.offload: {} ({}) in ordinary memory: the {} backend's device memory is the host's, so each "
                 "transfer is a plain copy", what, bytes, backend.name());
  else
    spdlog::warn("memory.offload: the {} backend could not pin all of the {} of host memory for {}; what it could "
                 "not is ordinary memory, where each copy holds the host until it is done, so those copies do not "
                 "overlap backward and AdamW", backend.name(), bytes, what);
  return optimizer;
}

}  // namespace gpt
