// The emulator's own settings, for tests: the emulated device, the seed of the thread order, and the
// number of host threads that run blocks. Not part of CUDA; only emulator tests include this.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace gpt::cuda::emu {

// An H100 SXM by default (CUDA's figures for compute capability 9.0).
struct DeviceConfig {
  std::string name = "NVIDIA H100 80GB HBM3 (emulated)";
  int device_count = 1;
  int major = 9;
  int minor = 0;
  int sm_count = 132;
  size_t global_memory_bytes = size_t{80} << 30;
  size_t shared_per_block_bytes = 48 << 10;           // without the opt-in attribute
  size_t shared_per_block_optin_bytes = 227 << 10;    // cudaFuncAttributeMaxDynamicSharedMemorySize limit
  size_t shared_per_sm_bytes = 228 << 10;
  int l2_cache_bytes = 50 << 20;
  int max_threads_per_block = 1024;
  // Whether the binary holds code this device runs. false stands for a GPU that the build's architectures
  // do not cover: every launch, and cudaFuncGetAttributes, fails with cudaErrorNoKernelImageForDevice.
  bool kernel_images = true;
};

// Replaces the emulated device; as cudaDeviceReset, frees every allocation and clears every error.
void configure_device(const DeviceConfig& config);
DeviceConfig device_config();

// The order in which a block's ready threads run between two switch points is a shuffle drawn from
// (seed, block index), and a nonzero seed also permutes the order in which blocks start. Default:
// GPT_CUDA_EMU_SEED from the environment, else 0 (blocks in index order), so a run is reproducible; a
// test sweeps seeds to expose a missing barrier or a reliance on block order.
void set_schedule_seed(uint64_t seed);
uint64_t schedule_seed();

// Host threads that run a grid's blocks (default: the machine's hardware threads).
void set_host_threads(unsigned threads);

// Whether [p, p + bytes) lies inside one pinned host allocation (cudaMallocHost, cudaHostAlloc): what a
// test asks of memory a backend says it pinned.
bool is_pinned_host_memory(const void* p, size_t bytes);

// Fails the next `count` pinned host allocations with cudaErrorMemoryAllocation, as a host whose
// page-locked limit is reached does (0 stops), so that a test sees the caller's fallback.
void fail_pinned_allocations(int count);

}  // namespace gpt::cuda::emu
