// Helpers of the row kernels' emulator tests: a DeviceContext with its own scratch and a few SMs (so a
// reduction's blocks each take several rows), and F32/I32 tensors over DeviceArrays.
#pragma once

#include "common/device_context.h"
#include "core/tensor.h"
#include "cuda/emu/emu_test_util.h"

#include <cstdint>
#include <random>
#include <vector>

namespace gpt::cuda::test {

struct TestContext {
  explicit TestContext(int sm_count) : scratch(size_t{8} << 20) {
    ctx.scratch = scratch.get();
    ctx.scratch_bytes = scratch.size();
    ctx.sm_count = sm_count;
    ctx.compute_capability = 90;
  }
  DeviceArray<unsigned char> scratch;
  DeviceContext ctx;
};

inline std::vector<float> uniform(size_t n, uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

template <class T>
Tensor device_tensor(const DeviceArray<T>& a, std::initializer_list<int64_t> shape) {
  return Tensor(a.get(), shape, std::is_same_v<T, int32_t> ? DType::I32 : DType::F32, Device::CUDA);
}

}  // namespace gpt::cuda::test
