// Linked when the build has no CUDA (GPT_CUDA=OFF, or AUTO without nvcc): asking for the CUDA backend
// says so plainly instead of failing at link time or through #ifdefs in the model.
#include "backend/cuda_entry.h"

namespace gpt::cuda {

bool built_with_cuda() { return false; }
bool emulated() { return false; }
int device_count() { return 0; }
std::string describe() { return "built without CUDA (configure with GPT_CUDA=ON and the CUDA toolkit)"; }
std::string unusable_device_reason(const BackendOptions&) { return "this gpt-train was built without CUDA"; }
std::unique_ptr<Backend> make_backend(const BackendOptions&) {
  GPT_FAIL("this gpt-train was built without CUDA; use train.backend: cpu, or rebuild with GPT_CUDA=ON");
}

}  // namespace gpt::cuda
