// The optimizer a run trains with, on the device or offloaded to host memory (memory.offload: optimizer), as
// the trainer and `gpt-train bench` build it, and the host backend an offloaded run's host side runs on.
#pragma once

#include "backend/backend.h"
#include "config/config.h"
#include "dist/data_parallel.h"
#include "model/gpt.h"
#include "optim/adamw.h"

#include <memory>

namespace gpt {

// The backend whose memory and cores hold and update the offloaded state: `backend` itself where device
// memory is the host's (the CPU: the same code path, no second copy of the threads), else a CPU backend with
// `threads` OpenMP threads, created into `host_backend` on the first call (which must outlive its users).
Backend& offload_host(Backend& backend, int threads, std::unique_ptr<Backend>& host_backend);

// AdamW over the parameters this rank updates (every tensor, or its ZeRO-1 shard). Offloaded, its host side is
// offload_host(backend, threads, host_backend); a model built with its masters on the host (masters_on_host in
// memory/planner.h) has AdamW update them in place. On the device, owning every tensor, AdamW also writes
// the BF16/F16 compute copy where the model has one it may write (GPT::compute_copy_slices).
std::unique_ptr<AdamW> make_optimizer(const Config& config, GPT& model, const DataParallel& dp, Backend& backend,
                                      int threads, std::unique_ptr<Backend>& host_backend);

}  // namespace gpt
