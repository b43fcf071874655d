// Helpers of the emulator's tests: device buffers, and a fixture that leaves the emulated device clean
// (no allocation, no sticky error, the process's seed) for the next test whatever this one did.
#pragma once

#include <gtest/gtest.h>

#include <string>
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

// The detail the emulator attached to the error `e` (cudaGetErrorString's text).
inline std::string error_text(cudaError_t e) { return cudaGetErrorString(e); }

}  // namespace gpt::cuda::test
