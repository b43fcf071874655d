#include "optim/host_arena.h"

namespace gpt {

HostArena::HostArena(ArenaLayout layout, Backend& device, Backend& host)
    : layout_(std::move(layout)), device_(device), host_(host) {
  const size_t bytes = layout_.total_bytes();
  if (bytes == 0) return;
  if (device_.capabilities().pinned_host_memory) base_ = device_.allocate_pinned(bytes);
  pinned_ = base_ != nullptr;
  if (!pinned_) {
    try {
      base_ = host_.allocate(bytes);
    } catch (const Error& e) {
      GPT_FAIL("memory.offload: optimizer: the host could not provide the {:.1f} MiB of '{}' ({}); free host "
               "memory, shard the optimizer over more ranks (dist.zero: 1) or set memory.offload: none",
               static_cast<double>(bytes) / (1 << 20), layout_.name(), e.what());
    }
  }
}

HostArena::~HostArena() {
  if (base_ == nullptr) return;
  if (pinned_) device_.deallocate_pinned(base_);
  else host_.deallocate(base_);
}

Tensor HostArena::tensor(size_t index) const { return layout_.view(index, base_, host_.device()); }

}  // namespace gpt
