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
std::unique_ptr<Backend> make_backend(const BackendOptions& options = {});

}  // namespace gpt::cuda
