// The optimizer a run trains with, on the device or offloaded to host memory (memory.offload: optimizer), as
// the trainer and `gpt-train bench` build it.
#pragma once

#include "backend/backend.h"
#include "config/config.h"
#include "dist/data_parallel.h"
#include "model/gpt.h"
#include "optim/adamw.h"

#include <memory>

namespace gpt {

// AdamW over the parameters this rank updates (every tensor, or its ZeRO-1 shard). Offloaded, its host side is
// `backend` itself where device memory is the host's (the CPU: the same code path, no second copy of the
// threads), else a CPU backend with `threads` OpenMP threads, created into `host_backend`, which must outlive
// the optimizer.
std::unique_ptr<AdamW> make_optimizer(const Config& config, GPT& model, const DataParallel& dp, Backend& backend,
                                      int threads, std::unique_ptr<Backend>& host_backend);

}  // namespace gpt
