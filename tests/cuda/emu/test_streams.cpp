// Streams and events: work runs asynchronously and in order on each stream, events order streams, and
// the legacy default stream synchronises with blocking streams.
#include <gtest/gtest.h>

#include <atomic>

#include "common/launch.cuh"
#include "cuda/emu/emu_test_util.h"

namespace gpt::cuda::test {
namespace {

__global__ void add_then_double(int* x, int add) {
  if (threadIdx.x == 0 && blockIdx.x == 0) *x = (*x + add) * 2;
}

TEST_F(EmuTest, AStreamRunsItsWorkInOrder) {
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  DeviceArray<int> x(1);
  int* pinned = nullptr;
  ASSERT_EQ(cudaMallocHost(reinterpret_cast<void**>(&pinned), sizeof(int)), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(x.get(), 0, sizeof(int), s), cudaSuccess);
  int expect = 0;
  for (int k = 1; k <= 10; ++k) {
    launch<add_then_double>(dim3(1), dim3(32), 0, s, x.get(), k);
    expect = (expect + k) * 2;
  }
  ASSERT_EQ(cudaMemcpyAsync(pinned, x.get(), sizeof(int), cudaMemcpyDeviceToHost, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(*pinned, expect);
  EXPECT_EQ(cudaStreamQuery(s), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
  EXPECT_EQ(cudaFreeHost(pinned), cudaSuccess);
}

// Spins until the host opens the gate: proves the launch returned before the kernel ran.
__global__ void wait_for_gate(int* gate, int* out) {
  while (std::atomic_ref<int>(*gate).load() == 0) {
  }
  *out = 42;
}

TEST_F(EmuTest, LaunchesAreAsynchronousToTheHost) {
  int* gate = nullptr;
  ASSERT_EQ(cudaMallocHost(reinterpret_cast<void**>(&gate), sizeof(int)), cudaSuccess);
  *gate = 0;
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  cudaEvent_t done;
  ASSERT_EQ(cudaEventCreate(&done), cudaSuccess);
  DeviceArray<int> out(1);
  launch<wait_for_gate>(dim3(1), dim3(1), 0, s, gate, out.get());
  ASSERT_EQ(cudaEventRecord(done, s), cudaSuccess);
  EXPECT_EQ(cudaStreamQuery(s), cudaErrorNotReady);
  EXPECT_EQ(cudaEventQuery(done), cudaErrorNotReady);
  std::atomic_ref<int>(*gate).store(1);
  ASSERT_EQ(cudaEventSynchronize(done), cudaSuccess);
  EXPECT_EQ(cudaEventQuery(done), cudaSuccess);
  EXPECT_EQ(out.download()[0], 42);
  EXPECT_EQ(cudaEventDestroy(done), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
  EXPECT_EQ(cudaFreeHost(gate), cudaSuccess);
}

TEST_F(EmuTest, AnEventOrdersOneStreamAfterAnother) {
  int* gate = nullptr;
  ASSERT_EQ(cudaMallocHost(reinterpret_cast<void**>(&gate), sizeof(int)), cudaSuccess);
  *gate = 0;
  cudaStream_t a, b;
  ASSERT_EQ(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking), cudaSuccess);
  cudaEvent_t produced;
  ASSERT_EQ(cudaEventCreateWithFlags(&produced, cudaEventDisableTiming), cudaSuccess);
  DeviceArray<int> x(1);
  launch<wait_for_gate>(dim3(1), dim3(1), 0, a, gate, x.get());  // x = 42 once the gate opens
  ASSERT_EQ(cudaEventRecord(produced, a), cudaSuccess);
  ASSERT_EQ(cudaStreamWaitEvent(b, produced, 0), cudaSuccess);
  launch<add_then_double>(dim3(1), dim3(1), 0, b, x.get(), 1);  // must see 42
  EXPECT_EQ(cudaStreamQuery(b), cudaErrorNotReady);
  std::atomic_ref<int>(*gate).store(1);
  ASSERT_EQ(cudaStreamSynchronize(b), cudaSuccess);
  EXPECT_EQ(x.download()[0], 86);
  float ms = 0;
  EXPECT_EQ(cudaEventElapsedTime(&ms, produced, produced), cudaErrorInvalidResourceHandle);  // timing disabled
  EXPECT_EQ(cudaEventDestroy(produced), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(a), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(b), cudaSuccess);
  EXPECT_EQ(cudaFreeHost(gate), cudaSuccess);
}

TEST_F(EmuTest, TheLegacyDefaultStreamWaitsForBlockingStreams) {
  int* gate = nullptr;
  ASSERT_EQ(cudaMallocHost(reinterpret_cast<void**>(&gate), sizeof(int)), cudaSuccess);
  *gate = 0;
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);  // blocking
  DeviceArray<int> x(1);
  launch<wait_for_gate>(dim3(1), dim3(1), 0, s, gate, x.get());
  launch<add_then_double>(dim3(1), dim3(1), 0, nullptr, x.get(), 0);  // on stream 0: after the gate kernel
  EXPECT_EQ(cudaStreamQuery(nullptr), cudaErrorNotReady);
  std::atomic_ref<int>(*gate).store(1);
  EXPECT_EQ(x.download()[0], 84);  // cudaMemcpy is on stream 0 too
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
  EXPECT_EQ(cudaFreeHost(gate), cudaSuccess);
}

TEST_F(EmuTest, EventsTimeTheWorkBetweenThem) {
  cudaEvent_t start, stop;
  ASSERT_EQ(cudaEventCreate(&start), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&stop), cudaSuccess);
  float ms = -1;
  EXPECT_EQ(cudaEventElapsedTime(&ms, start, stop), cudaErrorInvalidResourceHandle);  // never recorded
  // A failed call is also the thread's last error, which the next launch check would report, as in CUDA.
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidResourceHandle);
  DeviceArray<int> x(1);
  ASSERT_EQ(cudaEventRecord(start), cudaSuccess);
  launch<add_then_double>(dim3(4), dim3(256), 0, nullptr, x.get(), 1);
  ASSERT_EQ(cudaEventRecord(stop), cudaSuccess);
  ASSERT_EQ(cudaEventSynchronize(stop), cudaSuccess);
  ASSERT_EQ(cudaEventElapsedTime(&ms, start, stop), cudaSuccess);
  EXPECT_GE(ms, 0.0f);
  EXPECT_EQ(cudaEventDestroy(start), cudaSuccess);
  EXPECT_EQ(cudaEventDestroy(stop), cudaSuccess);
}

TEST_F(EmuTest, UnknownStreamsAreRefused) {
  auto* bogus = reinterpret_cast<cudaStream_t>(uintptr_t{0x1234});
  EXPECT_EQ(cudaStreamSynchronize(bogus), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaMemsetAsync(nullptr, 0, 0, bogus), cudaSuccess);  // zero bytes: nothing to queue
  DeviceArray<int> x(1);
  EXPECT_EQ(cudaMemsetAsync(x.get(), 0, 4, bogus), cudaErrorInvalidResourceHandle);
  EXPECT_THROW(launch<add_then_double>(dim3(1), dim3(1), 0, bogus, x.get(), 1), gpt::Error);
  EXPECT_EQ(cudaStreamDestroy(nullptr), cudaErrorInvalidResourceHandle);
}

}  // namespace
}  // namespace gpt::cuda::test
