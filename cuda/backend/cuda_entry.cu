// Device discovery for the CUDA build. A binary built with CUDA must still run on a machine without a
// GPU (CI, laptops): cudaGetDeviceCount failing there means "no devices", not an error.
#include "backend/cuda_entry.h"
#include "backend/cuda_backend.h"
#include "backend/device_support.h"
#include "common/cuda_check.h"

namespace gpt::cuda {
namespace {

// What the driver is asked about: whether this binary holds code for the device (every kernel of ours is
// compiled for the same architectures, so one stands for all).
__global__ void probe_kernel() {}

}  // namespace

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
    // The compute-capability rule alone: the driver's probe would create a context on every device.
    const DeviceSupport support = device_support(prop.major * 10 + prop.minor, built_architectures());
    s += fmt::format("; device {}: {} (sm_{}{}, {:.1f} GiB{})", i, prop.name, prop.major, prop.minor,
                     static_cast<double>(prop.totalGlobalMem) / (1ull << 30),
                     support.runs() ? "" : "; the CUDA backend cannot run on it: " + support.detail);
  }
  return s;
}

DeviceCheck check_device(int index) {
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, index));
  DeviceCheck check{index, prop.name, prop.major * 10 + prop.minor, {}};
  check.support = device_support(check.compute_capability, built_architectures());
  if (!check.support.runs()) return check;
  int current = 0;
  CUDA_CHECK(cudaGetDevice(&current));
  CUDA_CHECK(cudaSetDevice(index));
  cudaFuncAttributes attributes{};
  const cudaError_t probe = cudaFuncGetAttributes(&attributes, probe_kernel);
  cudaGetLastError();  // a missing image is not sticky; clear it for the calls after
  CUDA_CHECK(cudaSetDevice(current));
  if (probe == cudaErrorNoKernelImageForDevice || probe == cudaErrorInvalidDeviceFunction) {
    check.support = {DeviceSupport::Code::Unsupported,
                     fmt::format("this gpt-train holds no code that runs on it (the driver: {}); it was built for "
                                 "CUDA architectures {}: rebuild with scripts/build.sh -DCMAKE_CUDA_ARCHITECTURES={}",
                                 cudaGetErrorString(probe), built_architectures(), check.compute_capability)};
  } else {
    CUDA_CHECK(probe);
  }
  return check;
}

std::string unusable_device_reason(const BackendOptions& options) {
  const int count = device_count();
  if (count == 0) return "no CUDA device is present (" + describe() + ")";
  const DeviceCheck check = check_device(local_device_index(count, options.local_rank));
  return check.support.runs() ? "" : check.refusal();
}

}  // namespace gpt::cuda
