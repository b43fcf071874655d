// The fused attention's speed on a GPU: a benchmark, not a test (it asserts nothing about time), run by
// scripts/gpu_check.sh with GPT_FLASH_BENCH=1; skipped otherwise, and always on the emulator.
// GPT_FLASH_BENCH_ONLY=HSxT (e.g. 128x4096) runs one of the BF16 shapes below, for a profiler
// (f32-HSxT one of the FP32 ones).
// Causal, BF16 (the tensor-core kernels), head sizes 64 and 128, T = 1024, 4096, 8192, 16384 tokens per
// call (B = 16384 / T) and C = 2048 (NH = 2048 / hs), as FlashAttention-2's benchmarks run; then FP32
// (the fp32 recipe's tiled kernels, on FP32 FMAs) at T = 1024 and 4096. FLOPs count causal attention as half
// the square: forward 4 B NH T^2 hs / 2 (q k^T and P v), backward 2.5 times that (the five products of
// a backward); the recomputation of S and dPd in the separate dq pass is not counted, so the backward's
// figure is what the same work would cost a kernel that did not redo it.
#include "backend/cuda_entry.h"
#include "precision/float_formats.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace gpt::test {
namespace {

// Device tensors of small values (BF16 codes 0x3C00 + k, about 2^-7; the same values in FP32), freed with
// the struct; `zero` for the statistics.
struct DeviceTensors {
  Backend& backend;
  std::vector<void*> blocks;
  Tensor make(std::initializer_list<int64_t> dims, DType f, bool zero = false) {
    Tensor t(nullptr, dims, f, Device::CUDA);
    t.data = backend.allocate(t.bytes());
    blocks.push_back(t.data);
    std::vector<uint16_t> codes(t.numel());
    for (size_t i = 0; i < codes.size(); ++i) codes[i] = zero ? 0 : static_cast<uint16_t>(0x3C00 + (i * 2654435761u >> 24) % 128);
    if (f == DType::F32) {
      std::vector<float> host(codes.size());
      for (size_t i = 0; i < host.size(); ++i) host[i] = bf16_to_f32(codes[i]);
      backend.copy_to_device(t.data, host.data(), t.bytes());
    } else {
      backend.copy_to_device(t.data, codes.data(), t.bytes());
    }
    return t;
  }
  ~DeviceTensors() {
    for (void* p : blocks) backend.deallocate(p);
  }
};

template <class F>
double milliseconds(Backend& backend, F&& run, int repeats) {
  run();
  backend.synchronize();
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < repeats; ++i) run();
  backend.synchronize();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / repeats;
}

void run_shape(Backend& backend, DType f, int64_t hs, int64_t T) {
  const int64_t B = 16384 / T, C = 2048, NH = C / hs;
  DeviceTensors d{backend, {}};
  const Tensor qkv = d.make({B, T, 3 * C}, f), out = d.make({B, T, C}, f);
  const Tensor lse = d.make({B, NH, T}, DType::F32, true), delta = d.make({B, NH, T}, DType::F32, true);
  const Tensor dout = d.make({B, T, C}, f), dqkv = d.make({B, T, 3 * C}, f);
  const int nh = static_cast<int>(NH);
  const double fwd = milliseconds(backend, [&] { backend.attention_forward({out, lse, qkv, nh, {}}); }, 10);
  const double bwd =
      milliseconds(backend, [&] { backend.attention_backward({dqkv, delta, dout, qkv, lse, nh, {}, out}); }, 10);
  const double flops = 4.0 * B * NH * static_cast<double>(T) * T * hs / 2.0;
  std::printf("flash attention %s causal hs %3lld T %5lld (B %2lld, NH %2lld): forward %7.3f ms %6.1f TFLOP/s, "
              "backward %7.3f ms %6.1f TFLOP/s\n",
              std::string(dtype_name(f)).c_str(), static_cast<long long>(hs), static_cast<long long>(T),
              static_cast<long long>(B), static_cast<long long>(NH), fwd, flops / fwd / 1e9, bwd, 2.5 * flops / bwd / 1e9);
}

TEST(CudaFlashBenchmark, CausalTflops) {
  const char* enabled = std::getenv("GPT_FLASH_BENCH");
  if (!enabled || std::string(enabled) != "1") GTEST_SKIP() << "a benchmark: GPT_FLASH_BENCH=1 runs it (scripts/gpu_check.sh)";
  if (cuda::device_count() == 0 || cuda::emulated()) GTEST_SKIP() << "needs a GPU";
  const char* only = std::getenv("GPT_FLASH_BENCH_ONLY");
  auto backend = cuda::make_backend();
  for (int64_t hs : {64, 128})
    for (int64_t T : {1024, 4096, 8192})
      if (!only || std::to_string(hs) + "x" + std::to_string(T) == only) run_shape(*backend, DType::BF16, hs, T);
  for (int64_t hs : {64, 128})
    for (int64_t T : {1024, 4096})
      if (!only || "f32-" + std::to_string(hs) + "x" + std::to_string(T) == only) run_shape(*backend, DType::F32, hs, T);
}

}  // namespace
}  // namespace gpt::test
