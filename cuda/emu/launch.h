// The emulator's kernel launch: the arguments are converted to the kernel's parameter types and kept with
// the launch (the caller's may be gone by the time the stream runs it), and the grid is queued on the
// stream. The configuration is checked at once, as CUDA checks it: a bad launch is the caller's
// cudaGetLastError, a failure inside the kernel is the stream's (sticky) error.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "emu/vector_types.h"

struct CUstream_st;

namespace gpt::cuda::emu {

struct KernelLaunch {
  std::string name;
  const void* function = nullptr;  // identity for cudaFuncSetAttribute
  dim3 grid, block;
  size_t dynamic_shared_bytes = 0;
  void (*body)(const void* params) = nullptr;  // one thread's run of the kernel
  std::shared_ptr<const void> params;
  // The emulated device's major * 10 + minor at the launch: the instructions its threads may execute
  // (require_compute_capability). Set by launch_kernel.
  int compute_capability = 0;
};

void launch_kernel(KernelLaunch&& launch, CUstream_st* stream);

// "Kernel = name<...>" out of the launch template's __PRETTY_FUNCTION__ (GCC and clang spell it so).
std::string kernel_name_from_signature(const char* pretty_function);

template <class F>
struct KernelSignature;
template <class... P>
struct KernelSignature<void (*)(P...)> {
  using Params = std::tuple<std::decay_t<P>...>;
};
template <class... P>
struct KernelSignature<void (*)(P...) noexcept> : KernelSignature<void (*)(P...)> {};

template <auto Kernel, class Params>
void run_kernel_thread(const void* params) {
  std::apply(Kernel, *static_cast<const Params*>(params));
}

template <auto Kernel, class... Args>
void launch(dim3 grid, dim3 block, size_t shared_bytes, CUstream_st* stream, Args&&... args) {
  using Params = typename KernelSignature<decltype(Kernel)>::Params;
  static_assert(std::tuple_size_v<Params> == sizeof...(Args), "kernel launched with the wrong number of arguments");
  static const std::string name = kernel_name_from_signature(__PRETTY_FUNCTION__);
  KernelLaunch l;
  l.name = name;
  l.function = reinterpret_cast<const void*>(Kernel);
  l.grid = grid;
  l.block = block;
  l.dynamic_shared_bytes = shared_bytes;
  l.body = &run_kernel_thread<Kernel, Params>;
  l.params = std::make_shared<const Params>(std::forward<Args>(args)...);
  launch_kernel(std::move(l), stream);
}

// The block's dynamic shared memory (the launch's shared_bytes), 16-byte aligned and filled with 0xFF
// bytes when the block starts.
void* dynamic_shared_memory();

}  // namespace gpt::cuda::emu
