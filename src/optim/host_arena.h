// An arena in host memory for the offloaded optimizer's state that crosses the bus (the FP32 masters and
// the gradients' host copy): pinned through the device's backend where it gives pinned memory, since a
// GPU's copy engine reads and writes only page-locked memory while the device computes (a copy from
// ordinary memory is staged by the driver and holds the host until it is done); else ordinary memory of
// the host backend (the CPU backend, where device memory is the host's, or a failed cudaHostAlloc).
#pragma once

#include "backend/backend.h"
#include "core/arena.h"

namespace gpt {

class HostArena {
 public:
  // `device` is asked for pinned memory first; `host` gives ordinary memory otherwise and runs on it.
  HostArena(ArenaLayout layout, Backend& device, Backend& host);
  ~HostArena();
  HostArena(const HostArena&) = delete;
  HostArena& operator=(const HostArena&) = delete;

  Tensor tensor(size_t index) const;
  const ArenaLayout& layout() const { return layout_; }
  void* base() const { return base_; }
  // Whether the memory is the device backend's pinned memory.
  bool pinned() const { return pinned_; }

 private:
  ArenaLayout layout_;
  Backend& device_;
  Backend& host_;
  void* base_ = nullptr;
  bool pinned_ = false;
};

}  // namespace gpt
