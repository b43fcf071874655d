// The CUDA backend's ops (kernels, cuBLASLt matrix products, NCCL) are the subject of a later issue;
// until they land, asking for the CUDA backend says so instead of running something half-built.
#include "backend/cuda_entry.h"

namespace gpt::cuda {

std::unique_ptr<Backend> make_backend() {
  GPT_CHECK(device_count() > 0, "backend cuda requested but no CUDA device is present ({})", describe());
  GPT_FAIL("the CUDA backend's ops are not implemented yet in this version; use train.backend: cpu");
}

}  // namespace gpt::cuda
