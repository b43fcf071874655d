// The one way our code launches a kernel: gpt::cuda::launch<kernel>(grid, block, shared_bytes, stream,
// args...). In a GPU build it is <<<grid, block, shared_bytes, stream>>> followed by the launch-error
// check; in the emulator build (GPT_CUDA_EMU) it queues a run of the grid on the host. The kernel is a
// template argument so the emulator can name it in its errors (a deadlock, a bad launch).
#pragma once

#include <cstddef>
#include <utility>

#include "common/cuda_check.h"

namespace gpt::cuda {

template <auto Kernel, class... Args>
void launch(dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t stream, Args&&... args) {
#if defined(GPT_CUDA_EMU)
  emu::launch<Kernel>(grid, block, shared_bytes, stream, std::forward<Args>(args)...);
#else
  Kernel<<<grid, block, shared_bytes, stream>>>(std::forward<Args>(args)...);
#endif
  CUDA_CHECK(cudaGetLastError());
}

// launch() for a kernel whose dynamic shared memory may pass the 48 KiB default: the kernel's limit is
// raised to shared_bytes first (cudaFuncSetAttribute), as CUDA requires above 48 KiB.
template <auto Kernel, class... Args>
void launch_with_shared(dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t stream, Args&&... args) {
  CUDA_CHECK(cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared_bytes)));
  launch<Kernel>(grid, block, shared_bytes, stream, std::forward<Args>(args)...);
}

// The block's dynamic shared memory (the launch's shared_bytes) as T*. One extern array for every kernel,
// 16-byte aligned, as CUDA lays it out; the emulator gives each block its own, 0xFF-filled.
template <class T>
__device__ __forceinline__ T* dynamic_shared_memory() {
#if defined(GPT_CUDA_EMU)
  return static_cast<T*>(emu::dynamic_shared_memory());
#else
  extern __shared__ __align__(16) unsigned char gpt_dynamic_shared[];
  return reinterpret_cast<T*>(gpt_dynamic_shared);
#endif
}

}  // namespace gpt::cuda
