// The seam between the host code and the CUDA backend: implemented by cuda/backend when the build has
// CUDA, and by cuda/no_cuda (which reports "built without CUDA") otherwise. No #ifdef elsewhere.
#pragma once

#include "backend/backend.h"

#include <memory>
#include <string>

namespace gpt::cuda {

bool built_with_cuda();
// Whether the CUDA backend of this build runs on the host emulator (cuda/emu: test builds only).
bool emulated();
// Number of usable CUDA devices; 0 when none (or when built without CUDA).
int device_count();
// One line describing the CUDA build and devices, for `gpt-train info` and the start-up log.
std::string describe();
// Why the CUDA backend cannot run on the device this process would take (options.local_rank's, else the
// launcher's local rank's), or "" when it can: no device, a compute capability below 8.0, or no code in
// this build for the device. The first line of an error, or the reason train.backend auto takes the CPU.
std::string unusable_device_reason(const BackendOptions& options = {});
std::unique_ptr<Backend> make_backend(const BackendOptions& options = {});

}  // namespace gpt::cuda
