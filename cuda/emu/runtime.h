// Host emulation of the CUDA runtime API (GPT_CUDA_EMU builds only): the subset of cuda_runtime.h our
// sources call, with the toolkit's names, values and semantics, so one .cu source serves both builds.
//
// What it emulates and how (README, "CUDA emulator"):
// - memory: device and pinned allocations live in host memory, in a registry; every copy and memset
//   checks its pointers against it, so a host pointer passed as device memory (or the reverse) is an
//   error naming the call. New device memory is filled with 0xFF bytes, a NaN in every float format.
// - streams run their work in order on a worker thread each, asynchronously to the caller; the legacy
//   default stream (0) synchronises with the other blocking streams as CUDA's does.
// - errors: per host thread "last error" and the sticky error of a failed kernel, as CUDA keeps them;
//   cudaGetErrorString appends the emulator's detail (kernel, block, thread) to CUDA's own text.
#pragma once

#include <cstddef>
#include <cstdint>

#include "emu/device.h"
#include "emu/launch.h"
#include "emu/vector_types.h"

enum cudaError_t {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorInvalidDevicePointer = 17,
  cudaErrorInvalidMemcpyDirection = 21,
  cudaErrorInvalidDeviceFunction = 98,
  cudaErrorNoDevice = 100,
  cudaErrorInvalidDevice = 101,
  cudaErrorNoKernelImageForDevice = 209,
  cudaErrorInvalidResourceHandle = 400,
  cudaErrorNotReady = 600,
  cudaErrorIllegalAddress = 700,
  cudaErrorLaunchOutOfResources = 701,
  cudaErrorHostMemoryNotRegistered = 713,
  cudaErrorLaunchFailure = 719,
  cudaErrorUnknown = 999,
};
using cudaError = cudaError_t;

struct CUstream_st;
using cudaStream_t = CUstream_st*;
struct CUevent_st;
using cudaEvent_t = CUevent_st*;

enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4,
};

enum cudaFuncAttribute {
  cudaFuncAttributeMaxDynamicSharedMemorySize = 8,
};

#define cudaHostAllocDefault 0x00
#define cudaHostAllocPortable 0x01
#define cudaHostAllocMapped 0x02
#define cudaHostAllocWriteCombined 0x04
#define cudaStreamDefault 0x00
#define cudaStreamNonBlocking 0x01
#define cudaEventDefault 0x00
#define cudaEventBlockingSync 0x01
#define cudaEventDisableTiming 0x02

// The fields of the toolkit's cudaDeviceProp that describe what the emulator enforces or reports; the
// others (textures, PCI ids, ...) mean nothing here and are left out, so code reading them fails to
// compile in the emulator build instead of reading an invented value.
struct cudaDeviceProp {
  char name[256];
  size_t totalGlobalMem;
  size_t sharedMemPerBlock;
  int regsPerBlock;
  int warpSize;
  int maxThreadsPerBlock;
  int maxThreadsDim[3];
  int maxGridSize[3];
  size_t totalConstMem;
  int major;
  int minor;
  int multiProcessorCount;
  int concurrentKernels;
  int l2CacheSize;
  int maxThreadsPerMultiProcessor;
  size_t sharedMemPerMultiprocessor;
  int regsPerMultiprocessor;
  size_t sharedMemPerBlockOptin;
  int maxBlocksPerMultiProcessor;
};

const char* cudaGetErrorString(cudaError_t error);
const char* cudaGetErrorName(cudaError_t error);
cudaError_t cudaGetLastError();
cudaError_t cudaPeekAtLastError();

cudaError_t cudaGetDeviceCount(int* count);
cudaError_t cudaGetDevice(int* device);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device);
cudaError_t cudaDeviceSynchronize();
cudaError_t cudaDeviceReset();
cudaError_t cudaRuntimeGetVersion(int* version);
cudaError_t cudaDriverGetVersion(int* version);
cudaError_t cudaMemGetInfo(size_t* free, size_t* total);

cudaError_t cudaMalloc(void** ptr, size_t bytes);
cudaError_t cudaMallocAsync(void** ptr, size_t bytes, cudaStream_t stream);
cudaError_t cudaFree(void* ptr);
cudaError_t cudaFreeAsync(void* ptr, cudaStream_t stream);
cudaError_t cudaMallocHost(void** ptr, size_t bytes);
cudaError_t cudaHostAlloc(void** ptr, size_t bytes, unsigned int flags);
cudaError_t cudaFreeHost(void* ptr);
cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream = nullptr);
cudaError_t cudaMemset(void* ptr, int value, size_t bytes);
cudaError_t cudaMemsetAsync(void* ptr, int value, size_t bytes, cudaStream_t stream = nullptr);

cudaError_t cudaStreamCreate(cudaStream_t* stream);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int flags);
cudaError_t cudaStreamDestroy(cudaStream_t stream);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);
cudaError_t cudaStreamQuery(cudaStream_t stream);
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags = 0);

cudaError_t cudaEventCreate(cudaEvent_t* event);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags);
cudaError_t cudaEventDestroy(cudaEvent_t event);
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream = nullptr);
cudaError_t cudaEventSynchronize(cudaEvent_t event);
cudaError_t cudaEventQuery(cudaEvent_t event);
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end);

// The fields of the toolkit's cudaFuncAttributes that the emulator can give: the code's architecture
// (the device's, as if built for it) and the launch limits it enforces. Registers and local memory are
// the compiler's (ptxas -v), unknown here, and left out.
struct cudaFuncAttributes {
  size_t sharedSizeBytes;
  int maxThreadsPerBlock;
  int ptxVersion;
  int binaryVersion;
  int maxDynamicSharedSizeBytes;
};

namespace gpt::cuda::emu {
cudaError_t set_function_attribute(const void* func, cudaFuncAttribute attr, int value);
cudaError_t get_function_attributes(cudaFuncAttributes* attributes, const void* func);
}

template <class F>
cudaError_t cudaFuncSetAttribute(F* func, cudaFuncAttribute attr, int value) {
  return gpt::cuda::emu::set_function_attribute(reinterpret_cast<const void*>(func), attr, value);
}

template <class F>
cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* attributes, F* func) {
  return gpt::cuda::emu::get_function_attributes(attributes, reinterpret_cast<const void*>(func));
}
