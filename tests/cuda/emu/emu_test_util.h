// Helpers of the emulator's tests: device buffers, and a fixture that leaves the emulated device clean
// (no allocation, no sticky error, the process's seed) for the next test whatever this one did.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "common/cuda_check.h"
#include "emu/control.h"

namespace gpt::cuda::test {

class EmuTest : public ::testing::Test {
 protected:
  void SetUp() override { seed_ = emu::schedule_seed(); }
  void TearDown() override {
    cudaDeviceReset();
    emu::set_schedule_seed(seed_);  // the process's seed (GPT_CUDA_EMU_SEED), whatever the test swept
  }

 private:
  uint64_t seed_ = 0;
};

template <class T>
class DeviceArray {
 public:
  explicit DeviceArray(size_t n) : n_(n) { CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&p_), n * sizeof(T))); }
  explicit DeviceArray(const std::vector<T>& host) : DeviceArray(host.size()) { upload(host); }
  ~DeviceArray() { cudaFree(p_); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;

  T* get() const { return p_; }
  size_t size() const { return n_; }
  void upload(const std::vector<T>& host) {
    CUDA_CHECK(cudaMemcpy(p_, host.data(), n_ * sizeof(T), cudaMemcpyHostToDevice));
  }
  std::vector<T> download() const {
    std::vector<T> host(n_);
    CUDA_CHECK(cudaMemcpy(host.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost));
    return host;
  }

 private:
  T* p_ = nullptr;
  size_t n_;
};

// The default device's figures (an H100's) under another name and compute capability: a GPU of another
// generation, as far as the backend's start checks look.
inline emu::DeviceConfig renamed_device(std::string name, int major, int minor, bool kernel_images = true) {
  emu::DeviceConfig config;
  config.name = std::move(name);
  config.major = major;
  config.minor = minor;
  config.kernel_images = kernel_images;
  return config;
}

// A Tesla T4 (Turing, compute capability 7.5, CUDA's figures): the oldest GPU CUDA 13 compiles for,
// with no cp.async or BF16 mma and 64 KiB of shared memory a block.
inline emu::DeviceConfig tesla_t4() {
  emu::DeviceConfig t4;
  t4.name = "Tesla T4 (emulated)";
  t4.major = 7;
  t4.minor = 5;
  t4.sm_count = 40;
  t4.global_memory_bytes = size_t{15} << 30;
  t4.shared_per_block_bytes = 48 << 10;
  t4.shared_per_block_optin_bytes = 64 << 10;
  t4.shared_per_sm_bytes = 64 << 10;
  t4.l2_cache_bytes = 4 << 20;
  t4.max_threads_per_block = 1024;
  return t4;
}

// The emulated device for one scope, the default (an H100) back afterwards whatever happened in it.
class EmulatedDevice {
 public:
  explicit EmulatedDevice(const emu::DeviceConfig& config) { emu::configure_device(config); }
  ~EmulatedDevice() { emu::configure_device(emu::DeviceConfig{}); }
  EmulatedDevice(const EmulatedDevice&) = delete;
  EmulatedDevice& operator=(const EmulatedDevice&) = delete;
};

// The detail the emulator attached to the error `e` (cudaGetErrorString's text).
inline std::string error_text(cudaError_t e) { return cudaGetErrorString(e); }

}  // namespace gpt::cuda::test
