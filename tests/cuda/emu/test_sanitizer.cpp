// Under scripts/sanitize.sh (ASan) the emulated kernels are instrumented host code: an access one element
// past a cudaMalloc allocation, or past the launch's dynamic shared memory, is a heap-buffer-overflow
// report that aborts the process. Skipped in builds without AddressSanitizer.
#include <gtest/gtest.h>

#include "common/launch.cuh"
#include "cuda/emu/emu_test_util.h"

#if defined(__SANITIZE_ADDRESS__)
#define GPT_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define GPT_TEST_ASAN 1
#endif
#endif

namespace gpt::cuda::test {
namespace {

// 64 threads write 64 floats into 63.
__global__ void write_one_past_the_end(float* out) { out[blockIdx.x * blockDim.x + threadIdx.x] = 1.0f; }

__global__ void read_past_dynamic_shared(float* out) {
  float* s = dynamic_shared_memory<float>();
  s[threadIdx.x] = 0.0f;
  __syncthreads();
  out[threadIdx.x] = s[threadIdx.x + 1];  // thread 31 reads s[32] of 32 floats
}

class EmuSanitizerTest : public EmuTest {
 protected:
  void SetUp() override {
    EmuTest::SetUp();
#if !defined(GPT_TEST_ASAN)
    GTEST_SKIP() << "needs the AddressSanitizer build (scripts/sanitize.sh)";
#endif
    // The emulator runs stream and block threads; the child of the death test starts its own.
    GTEST_FLAG_SET(death_test_style, "threadsafe");
  }
};

TEST_F(EmuSanitizerTest, AKernelWritingPastItsAllocationAborts) {
  EXPECT_DEATH(
      {
        float* p = nullptr;
        CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&p), 63 * sizeof(float)));
        launch<write_one_past_the_end>(dim3(2), dim3(32), 0, nullptr, p);
        CUDA_CHECK(cudaDeviceSynchronize());
      },
      "heap-buffer-overflow");
}

TEST_F(EmuSanitizerTest, AKernelReadingPastItsDynamicSharedMemoryAborts) {
  EXPECT_DEATH(
      {
        float* p = nullptr;
        CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&p), 32 * sizeof(float)));
        launch<read_past_dynamic_shared>(dim3(1), dim3(32), 32 * sizeof(float), nullptr, p);
        CUDA_CHECK(cudaDeviceSynchronize());
      },
      "heap-buffer-overflow");
}

}  // namespace
}  // namespace gpt::cuda::test
