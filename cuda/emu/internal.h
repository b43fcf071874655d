// Shared between the emulator's own sources: error recording, stream work, the allocation registry and
// the grid runner. Not for kernels or tests.
#pragma once

#include <functional>
#include <string>

#include "emu/control.h"
#include "emu/runtime.h"

namespace gpt::cuda::emu::detail {

// Records `code` with `detail` as this host thread's last error and returns it.
cudaError_t fail(cudaError_t code, const std::string& detail);
// The sticky error of a failed kernel (cudaSuccess while none): every call returns it until a reset.
cudaError_t sticky_error();
void set_sticky_error(cudaError_t code, const std::string& detail);
// Sticky error first, else cudaSuccess; the API calls start with it, as CUDA's do.
cudaError_t check_sticky();

DeviceConfig current_config();

// Work queued on a stream runs in order on its worker; an exception from it (a kernel failure) becomes
// the sticky error. nullptr is the legacy default stream.
cudaError_t enqueue(cudaStream_t stream, std::function<void()> work);
cudaError_t synchronize_stream(cudaStream_t stream);
cudaError_t synchronize_device();
bool is_stream(cudaStream_t stream);

enum class MemoryKind { kHost, kDevice, kPinned };
void free_all_allocations();
size_t device_bytes_in_use();

// Runs every block of the launch; throws gpt::Error on a failure inside the kernel.
void run_grid(const KernelLaunch& launch);
void set_grid_threads(unsigned threads);
int max_dynamic_shared(const void* function);
void clear_function_attributes();

}  // namespace gpt::cuda::emu::detail
