// The emulated cublasLtMatmul in stream order (it must read what kernels queued before it wrote) and
// its pointer-alignment rule (an algorithm chosen for aligned pointers refuses less aligned ones).
#include "common/launch.cuh"
#include "cuda/emu/emu_test_util.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace gpt::cuda::test {
namespace {

// Waits until the host opens the gate, then writes x[i] = i + 1.
__global__ void fill_after_gate(const int* gate, float* x, int n) {
  while (std::atomic_ref<const int>(*gate).load() == 0) {
  }
  for (int i = 0; i < n; ++i) x[i] = static_cast<float>(i + 1);
}

struct Product {
  cublasLtHandle_t handle = nullptr;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t layout = nullptr;  // every operand: 2x2 F32, ld 2
  cublasLtMatmulPreference_t pref = nullptr;
  cublasLtMatmulAlgo_t algo{};

  explicit Product(uint32_t min_alignment_a) {
    CUBLAS_CHECK(cublasLtCreate(&handle));
    CUBLAS_CHECK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&layout, CUDA_R_32F, 2, 2, 2));
    CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &min_alignment_a,
                                                      sizeof min_alignment_a));
    cublasLtMatmulHeuristicResult_t result{};
    int count = 0;
    CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(handle, desc, layout, layout, layout, layout, pref, 1, &result, &count));
    EXPECT_EQ(count, 1);
    algo = result.algo;
  }
  ~Product() {
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatrixLayoutDestroy(layout);
    cublasLtMatmulDescDestroy(desc);
    cublasLtDestroy(handle);
  }
  cublasStatus_t run(const float* a, const float* b, float* d, cudaStream_t stream) {
    const float alpha = 1.0f, beta = 0.0f;
    return cublasLtMatmul(handle, desc, &alpha, a, layout, b, layout, &beta, d, layout, d, layout, &algo, nullptr, 0,
                          stream);
  }
};

TEST_F(EmuTest, CublasLtMatmulRunsAfterTheWorkQueuedBeforeIt) {
  int* gate = nullptr;
  ASSERT_EQ(cudaMallocHost(reinterpret_cast<void**>(&gate), sizeof(int)), cudaSuccess);
  *gate = 0;
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  DeviceArray<float> a(4), b(std::vector<float>{1, 0, 0, 1}), d(4);
  launch<fill_after_gate>(dim3(1), dim3(1), 0, s, gate, a.get(), 4);
  // The gate opens only after the product has been queued: a product that did not wait for the kernel
  // would read A's poison (NaN).
  std::thread opener([gate] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::atomic_ref<int>(*gate).store(1);
  });
  Product p(256);
  const cublasStatus_t status = p.run(a.get(), b.get(), d.get(), s);
  opener.join();
  ASSERT_EQ(status, CUBLAS_STATUS_SUCCESS) << gpt::emu::cublaslt_last_refusal();
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(d.download(), (std::vector<float>{1, 2, 3, 4}));  // A times the identity
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
  EXPECT_EQ(cudaFreeHost(gate), cudaSuccess);
}

TEST_F(EmuTest, CublasLtMatmulRefusesPointersLessAlignedThanItsPreferenceSaid) {
  DeviceArray<float> a(std::vector<float>{0, 1, 2, 3, 4}), b(std::vector<float>{1, 0, 0, 1}), d(4);
  const float* a_off = a.get() + 1;  // 4-byte aligned only
  {
    Product assumes_aligned(256);
    EXPECT_EQ(assumes_aligned.run(a_off, b.get(), d.get(), nullptr), CUBLAS_STATUS_NOT_SUPPORTED);
    EXPECT_NE(std::string(gpt::emu::cublaslt_last_refusal()).find("MIN_ALIGNMENT_A_BYTES"), std::string::npos)
        << gpt::emu::cublaslt_last_refusal();
  }
  Product told(4);
  ASSERT_EQ(told.run(a_off, b.get(), d.get(), nullptr), CUBLAS_STATUS_SUCCESS) << gpt::emu::cublaslt_last_refusal();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(d.download(), (std::vector<float>{1, 2, 3, 4}));
}

}  // namespace
}  // namespace gpt::cuda::test
