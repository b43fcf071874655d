// Device discovery for the CUDA build. A binary built with CUDA must still run on a machine without a
// GPU (CI, laptops): cudaGetDeviceCount failing there means "no devices", not an error.
#include "backend/cuda_entry.h"
#include "common/cuda_check.h"

namespace gpt::cuda {

bool built_with_cuda() { return true; }

bool emulated() {
#if defined(GPT_CUDA_EMU)
  return true;
#else
  return false;
#endif
}

int device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device / no driver" status
    return 0;
  }
  return count;
}

std::string describe() {
  int runtime = 0;
  cudaRuntimeGetVersion(&runtime);
  std::string s = fmt::format("built with CUDA runtime {}.{}{}", runtime / 1000, (runtime % 1000) / 10,
                              emulated() ? ", emulated on the host (cuda/emu)" : "");
  const int n = device_count();
  if (n == 0) return s + "; no CUDA device present";
  for (int i = 0; i < n; ++i) {
    cudaDeviceProp prop{};
    CUDA_CHECK(cudaGetDeviceProperties(&prop, i));
    s += fmt::format("; device {}: {} (sm_{}{}, {:.1f} GiB)", i, prop.name, prop.major, prop.minor,
                     static_cast<double>(prop.totalGlobalMem) / (1ull << 30));
  }
  return s;
}

}  // namespace gpt::cuda
