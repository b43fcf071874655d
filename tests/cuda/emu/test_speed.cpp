// How fast the emulator runs three reference kernels, so test shapes can be sized for CI: printed, not
// asserted (the machine's load decides the numbers); each result is still checked.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>

#include "common/launch.cuh"
#include "common/row_sum.h"
#include "cuda/emu/emu_test_util.h"
#include "cuda/emu/mma_gemm_kernel.h"
#include "precision/float_formats.h"

#if defined(__SANITIZE_ADDRESS__)
#define GPT_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define GPT_TEST_ASAN 1
#endif
#endif

namespace gpt::cuda::test {
namespace {

__global__ void axpb(const float* x, float* y, float a, float b, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + b;
}

template <class F>
double milliseconds(F&& run) {
  run();  // warm: stacks mapped, pool started
  const auto t0 = std::chrono::steady_clock::now();
  run();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

TEST_F(EmuTest, SpeedOfThreeReferenceKernels) {
#if defined(GPT_TEST_ASAN)
  // Under ASan a fiber switch costs about 50 times more (1M-element kernel: 11 s); the numbers would
  // describe the sanitizer, and the kernels run in the other tests anyway.
  GTEST_SKIP() << "timings are meaningless under AddressSanitizer";
#endif
  const int n = 1 << 20;
  std::vector<float> x(n);
  for (int i = 0; i < n; ++i) x[i] = static_cast<float>(i % 1000);
  DeviceArray<float> dx(x), dy(n);
  const double elementwise = milliseconds([&] {
    launch<axpb>(dim3(n / 256), dim3(256), 0, nullptr, dx.get(), dy.get(), 2.0f, 1.0f, n);
    CUDA_CHECK(cudaDeviceSynchronize());
  });
  const std::vector<float> y = dy.download();
  for (int i = 0; i < n; i += 4099) ASSERT_EQ(y[i], 2.0f * x[i] + 1.0f);

  DeviceArray<float> m(std::vector<float>(256 * 256, 1.0f)), sums(256);
  const double reduction = milliseconds([&] {
    row_sum(m.get(), sums.get(), 256, 256, nullptr);
    CUDA_CHECK(cudaDeviceSynchronize());
  });
  for (float s : sums.download()) ASSERT_EQ(s, 256.0f);

  const int d = 128;
  DeviceArray<uint16_t> a(std::vector<uint16_t>(d * d, f32_to_bf16(1.0f))), b(std::vector<uint16_t>(d * d, f32_to_bf16(0.5f)));
  DeviceArray<float> c(d * d);
  const double mma = milliseconds([&] {
    launch<mma_gemm<MmaInput::kBf16>>(dim3(d / kTile, d / kTile), dim3(128), 0, nullptr, a.get(), b.get(), c.get(), d, d,
                                      d);
    CUDA_CHECK(cudaDeviceSynchronize());
  });
  for (float v : c.download()) ASSERT_EQ(v, 64.0f);

  std::printf("CUDA emulator speed: 1M-element elementwise %.1f ms, 256x256 row_sum %.1f ms, "
              "128x128x128 bf16 mma tile kernel %.1f ms\n",
              elementwise, reduction, mma);
  RecordProperty("elementwise_1m_ms", std::to_string(elementwise));
  RecordProperty("row_sum_256x256_ms", std::to_string(reduction));
  RecordProperty("mma_128_cubed_ms", std::to_string(mma));
}

}  // namespace
}  // namespace gpt::cuda::test
