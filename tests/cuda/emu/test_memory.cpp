// The emulator's memory API: the NaN fill, the direction checks against the allocation registry, pinned
// memory, and what cudaMemGetInfo reports.
#include <gtest/gtest.h>

#include <cstring>

#include "cuda/emu/emu_test_util.h"
#include "precision/float_formats.h"

namespace gpt::cuda::test {
namespace {

TEST_F(EmuTest, NewDeviceMemoryIsNaNInEveryFloatFormat) {
  void* p = nullptr;
  ASSERT_EQ(cudaMalloc(&p, 64), cudaSuccess);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 256, 0u);
  unsigned char bytes[64];
  ASSERT_EQ(cudaMemcpy(bytes, p, 64, cudaMemcpyDeviceToHost), cudaSuccess);
  float f;
  std::memcpy(&f, bytes, 4);
  EXPECT_TRUE(std::isnan(f));
  uint16_t h;
  std::memcpy(&h, bytes, 2);
  EXPECT_TRUE(std::isnan(bf16_to_f32(h)));
  EXPECT_TRUE(std::isnan(f16_to_f32(h)));
  EXPECT_TRUE(std::isnan(e4m3_to_f32(bytes[0])));
  EXPECT_TRUE(std::isnan(e5m2_to_f32(bytes[0])));
  EXPECT_EQ(cudaFree(p), cudaSuccess);
}

TEST_F(EmuTest, CopiesRefusePointersOnTheWrongSideNamingTheCall) {
  std::vector<float> host(16, 1.0f), back(16, 0.0f);
  DeviceArray<float> dev(16), other(16);
  float* d = dev.get();

  cudaError_t e = cudaMemcpy(host.data(), back.data(), 64, cudaMemcpyHostToDevice);
  EXPECT_EQ(e, cudaErrorInvalidDevicePointer);
  EXPECT_NE(error_text(e).find("cudaMemcpy(cudaMemcpyHostToDevice): dst"), std::string::npos) << error_text(e);
  EXPECT_NE(error_text(e).find("is pageable host memory, not device memory"), std::string::npos) << error_text(e);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidDevicePointer);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);  // not sticky

  e = cudaMemcpy(d, other.get(), 64, cudaMemcpyHostToDevice);
  EXPECT_EQ(e, cudaErrorInvalidValue);
  EXPECT_NE(error_text(e).find("src"), std::string::npos) << error_text(e);
  EXPECT_NE(error_text(e).find("is device memory, not host memory"), std::string::npos) << error_text(e);
  EXPECT_EQ(cudaMemcpy(back.data(), host.data(), 64, cudaMemcpyDeviceToHost), cudaErrorInvalidDevicePointer);
  EXPECT_EQ(cudaMemcpyAsync(d, host.data(), 64, cudaMemcpyDeviceToDevice, nullptr), cudaErrorInvalidDevicePointer);
  EXPECT_EQ(cudaMemcpy(host.data(), d, 64, cudaMemcpyHostToHost), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpy(d, host.data(), 64, static_cast<cudaMemcpyKind>(7)), cudaErrorInvalidMemcpyDirection);

  // A range that runs past its allocation, from an interior pointer.
  e = cudaMemcpy(d + 8, host.data(), 64, cudaMemcpyHostToDevice);
  EXPECT_EQ(e, cudaErrorInvalidValue);
  EXPECT_NE(error_text(e).find("runs past the end of its 64-byte allocation (offset 32)"), std::string::npos)
      << error_text(e);

  EXPECT_EQ(cudaMemset(host.data(), 0, 64), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemset(d, 0, 65), cudaErrorInvalidValue);
  EXPECT_EQ(cudaFree(host.data()), cudaErrorInvalidValue);
  EXPECT_EQ(cudaFree(d + 1), cudaErrorInvalidValue);
  EXPECT_EQ(cudaFreeHost(d), cudaErrorInvalidValue);

  // The right calls work, and cudaMemcpyDefault infers the direction.
  ASSERT_EQ(cudaMemcpy(d, host.data(), 64, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(other.get(), d, 64, cudaMemcpyDeviceToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(back.data(), other.get(), 64, cudaMemcpyDefault), cudaSuccess);
  EXPECT_EQ(back, host);
  ASSERT_EQ(cudaMemset(d, 0, 64), cudaSuccess);
  EXPECT_EQ(dev.download(), std::vector<float>(16, 0.0f));
}

TEST_F(EmuTest, PinnedMemoryIsHostMemoryToTheChecks) {
  float* pinned = nullptr;
  float* pinned2 = nullptr;
  ASSERT_EQ(cudaMallocHost(reinterpret_cast<void**>(&pinned), 64), cudaSuccess);
  ASSERT_EQ(cudaHostAlloc(reinterpret_cast<void**>(&pinned2), 64, cudaHostAllocPortable), cudaSuccess);
  for (int i = 0; i < 16; ++i) pinned[i] = static_cast<float>(i);
  DeviceArray<float> dev(16);
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(dev.get(), pinned, 64, cudaMemcpyHostToDevice, s), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(pinned2, dev.get(), 64, cudaMemcpyDeviceToHost, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  for (int i = 0; i < 16; ++i) EXPECT_EQ(pinned2[i], static_cast<float>(i));
  EXPECT_EQ(cudaMemcpy(pinned, pinned2, 64, cudaMemcpyHostToDevice), cudaErrorInvalidDevicePointer);
  EXPECT_EQ(cudaFree(pinned), cudaErrorInvalidValue);
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
  EXPECT_EQ(cudaFreeHost(pinned), cudaSuccess);
  EXPECT_EQ(cudaFreeHost(pinned2), cudaSuccess);
}

TEST_F(EmuTest, MemGetInfoCountsAllocationsAgainstTheConfiguredDevice) {
  emu::DeviceConfig config;
  config.global_memory_bytes = size_t{1} << 20;
  emu::configure_device(config);
  size_t free0 = 0, total = 0;
  ASSERT_EQ(cudaMemGetInfo(&free0, &total), cudaSuccess);
  EXPECT_EQ(total, size_t{1} << 20);
  EXPECT_EQ(free0, total);
  void* a = nullptr;
  void* b = nullptr;
  ASSERT_EQ(cudaMallocAsync(&a, 1000, nullptr), cudaSuccess);
  size_t free1 = 0;
  ASSERT_EQ(cudaMemGetInfo(&free1, &total), cudaSuccess);
  EXPECT_EQ(free1, free0 - 1000);
  const cudaError_t e = cudaMalloc(&b, size_t{1} << 20);
  EXPECT_EQ(e, cudaErrorMemoryAllocation);
  EXPECT_EQ(b, nullptr);
  ASSERT_EQ(cudaFreeAsync(a, nullptr), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  ASSERT_EQ(cudaMemGetInfo(&free1, &total), cudaSuccess);
  EXPECT_EQ(free1, free0);
  emu::configure_device(emu::DeviceConfig{});
}

TEST_F(EmuTest, DevicePropertiesDescribeTheConfiguredDevice) {
  int count = 0;
  ASSERT_EQ(cudaGetDeviceCount(&count), cudaSuccess);
  EXPECT_EQ(count, 1);
  cudaDeviceProp prop{};
  ASSERT_EQ(cudaGetDeviceProperties(&prop, 0), cudaSuccess);
  EXPECT_EQ(prop.major, 9);
  EXPECT_EQ(prop.minor, 0);
  EXPECT_EQ(prop.multiProcessorCount, 132);
  EXPECT_EQ(prop.sharedMemPerMultiprocessor, size_t{228} << 10);
  EXPECT_EQ(prop.sharedMemPerBlockOptin, size_t{227} << 10);
  EXPECT_EQ(prop.warpSize, 32);
  EXPECT_EQ(prop.maxThreadsPerBlock, 1024);
  EXPECT_EQ(cudaGetDeviceProperties(&prop, 1), cudaErrorInvalidDevice);
  EXPECT_EQ(cudaSetDevice(1), cudaErrorInvalidDevice);

  emu::DeviceConfig ampere;
  ampere.name = "NVIDIA A100-SXM4-40GB (emulated)";
  ampere.major = 8;
  ampere.sm_count = 108;
  ampere.device_count = 2;
  ampere.shared_per_block_optin_bytes = 163 << 10;
  emu::configure_device(ampere);
  ASSERT_EQ(cudaGetDeviceCount(&count), cudaSuccess);
  EXPECT_EQ(count, 2);
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  ASSERT_EQ(cudaGetDeviceProperties(&prop, 1), cudaSuccess);
  EXPECT_STREQ(prop.name, "NVIDIA A100-SXM4-40GB (emulated)");
  EXPECT_EQ(prop.major, 8);
  EXPECT_EQ(prop.multiProcessorCount, 108);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  emu::configure_device(emu::DeviceConfig{});
}

}  // namespace
}  // namespace gpt::cuda::test
