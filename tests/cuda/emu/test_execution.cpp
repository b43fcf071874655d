// The emulator's execution model: built-in variables, barriers, static and dynamic shared memory, the
// seeded thread order (which must expose a missing __syncthreads) and block order, deadlocks and launch
// errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <set>
#include <thread>

#include "common/launch.cuh"
#include "cuda/emu/emu_test_util.h"

namespace gpt::cuda::test {
namespace {

__global__ void write_indices(uint4* out) {
  const unsigned block = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  const unsigned thread = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  const unsigned threads = blockDim.x * blockDim.y * blockDim.z;
  out[block * threads + thread] = {threadIdx.x + 100 * threadIdx.y + 10000 * threadIdx.z,
                                   blockIdx.x + 100 * blockIdx.y + 10000 * blockIdx.z,
                                   blockDim.x + 100 * blockDim.y + 10000 * blockDim.z,
                                   gridDim.x + 100 * gridDim.y + 10000 * gridDim.z};
}

TEST_F(EmuTest, EveryThreadOfAThreeDimensionalGridSeesItsOwnIndices) {
  const dim3 grid(3, 2, 2), block(5, 3, 2);
  DeviceArray<uint4> out(3 * 2 * 2 * 5 * 3 * 2);
  launch<write_indices>(grid, block, 0, nullptr, out.get());
  const std::vector<uint4> got = out.download();
  size_t i = 0;
  for (unsigned bz = 0; bz < 2; ++bz)
    for (unsigned by = 0; by < 2; ++by)
      for (unsigned bx = 0; bx < 3; ++bx)
        for (unsigned tz = 0; tz < 2; ++tz)
          for (unsigned ty = 0; ty < 3; ++ty)
            for (unsigned tx = 0; tx < 5; ++tx, ++i) {
              EXPECT_EQ(got[i].x, tx + 100 * ty + 10000 * tz) << i;
              EXPECT_EQ(got[i].y, bx + 100 * by + 10000 * bz) << i;
              EXPECT_EQ(got[i].z, 5u + 300 + 20000) << i;
              EXPECT_EQ(got[i].w, 3u + 200 + 20000) << i;
            }
}

// Reverses each block's 256 values through a static shared tile: correct only if every thread wrote
// its element before any thread reads another's.
template <bool kBarrier>
__global__ void reverse_in_shared(const int* in, int* out) {
  __shared__ int tile[256];
  const int t = threadIdx.x, base = blockIdx.x * 256;
  tile[t] = in[base + t];
  if (kBarrier) __syncthreads();
  out[base + t] = tile[255 - t];
}

std::vector<int> iota_vector(size_t n, int start = 0) {
  std::vector<int> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = start + static_cast<int>(i);
  return v;
}

bool reversed(const std::vector<int>& in, const std::vector<int>& out) {
  for (size_t b = 0; b < in.size() / 256; ++b)
    for (size_t t = 0; t < 256; ++t)
      if (out[b * 256 + t] != in[b * 256 + 255 - t]) return false;
  return true;
}

TEST_F(EmuTest, SharedTileWithBarrierIsCorrectUnderEverySeed) {
  const std::vector<int> in = iota_vector(8 * 256, 7);
  DeviceArray<int> d_in(in), d_out(in.size());
  for (uint64_t seed = 0; seed < 8; ++seed) {
    emu::set_schedule_seed(seed);
    launch<reverse_in_shared<true>>(dim3(8), dim3(256), 0, nullptr, d_in.get(), d_out.get());
    EXPECT_TRUE(reversed(in, d_out.download())) << "seed " << seed;
  }
}

TEST_F(EmuTest, MissingBarrierIsCaughtWithinAFewSeeds) {
  int caught = 0;
  for (uint64_t seed = 0; seed < 4; ++seed) {
    emu::set_schedule_seed(seed);
    // Fresh inputs each seed, so a tile left by an earlier launch cannot hold the right values.
    const std::vector<int> in = iota_vector(4 * 256, static_cast<int>(1000 * (seed + 1)));
    DeviceArray<int> d_in(in), d_out(in.size());
    launch<reverse_in_shared<false>>(dim3(4), dim3(256), 0, nullptr, d_in.get(), d_out.get());
    caught += !reversed(in, d_out.download());
  }
  EXPECT_EQ(caught, 4) << "the racy kernel gave the right answer under some seeds";
}

// The thread order differs between seeds and is the same for one seed.
__global__ void record_order(int* order, int* counter) { order[atomicAdd(counter, 1)] = threadIdx.x; }

std::vector<int> order_under_seed(uint64_t seed) {
  emu::set_schedule_seed(seed);
  DeviceArray<int> order(64), counter(std::vector<int>{0});
  launch<record_order>(dim3(1), dim3(64), 0, nullptr, order.get(), counter.get());
  return order.download();
}

TEST_F(EmuTest, ThreadOrderIsASeededShuffle) {
  const std::vector<int> a = order_under_seed(1), b = order_under_seed(2), a_again = order_under_seed(1);
  EXPECT_EQ(a, a_again);
  EXPECT_NE(a, b);
  std::set<int> ids(a.begin(), a.end());
  EXPECT_EQ(ids.size(), 64u);
}

// The order blocks start in: index order under seed 0, a shuffle under a nonzero seed (the same one for
// the same seed), so a kernel whose blocks depend on each other's order fails under some seed. One host
// thread, so that the start order is the recorded order.
__global__ void record_block_order(int* order, int* counter) {
  if (threadIdx.x == 0) order[atomicAdd(counter, 1)] = static_cast<int>(blockIdx.x + gridDim.x * blockIdx.y);
}

std::vector<int> block_order_under_seed(uint64_t seed) {
  emu::set_schedule_seed(seed);
  DeviceArray<int> order(6 * 7), counter(std::vector<int>{0});
  launch<record_block_order>(dim3(6, 7), dim3(32), 0, nullptr, order.get(), counter.get());
  return order.download();
}

TEST_F(EmuTest, BlockOrderIsIndexOrderUnderSeedZeroAndASeededShuffleOtherwise) {
  emu::set_host_threads(1);
  std::vector<int> in_order(6 * 7);
  for (int i = 0; i < 6 * 7; ++i) in_order[i] = i;
  EXPECT_EQ(block_order_under_seed(0), in_order);
  const std::vector<int> a = block_order_under_seed(1), b = block_order_under_seed(2), a_again = block_order_under_seed(1);
  emu::set_host_threads(std::max(1u, std::thread::hardware_concurrency()));
  EXPECT_EQ(a, a_again);
  EXPECT_NE(a, in_order);
  EXPECT_NE(a, b);
  std::vector<int> sorted = a;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, in_order) << "every block ran once";
}

__global__ void count_barrier_predicates(int* out) {
  const int t = threadIdx.x;
  out[0 * 96 + t] = __syncthreads_count(t % 3 == 0);
  out[1 * 96 + t] = __syncthreads_and(t < 96);
  out[2 * 96 + t] = __syncthreads_and(t != 50);
  out[3 * 96 + t] = __syncthreads_or(t == 95);
  out[4 * 96 + t] = __syncthreads_or(0);
}

TEST_F(EmuTest, BarrierPredicateVariants) {
  DeviceArray<int> out(5 * 96);
  launch<count_barrier_predicates>(dim3(2), dim3(96), 0, nullptr, out.get());
  const std::vector<int> got = out.download();
  for (int t = 0; t < 96; ++t) {
    EXPECT_EQ(got[t], 32);
    EXPECT_EQ(got[96 + t], 1);
    EXPECT_EQ(got[2 * 96 + t], 0);
    EXPECT_EQ(got[3 * 96 + t], 1);
    EXPECT_EQ(got[4 * 96 + t], 0);
  }
}

// Dynamic shared memory: a block-wide prefix sum (Hillis-Steele, two buffers) over blockDim.x values.
__global__ void prefix_sum_dynamic(const float* in, float* out, float* first_seen) {
  float* buf = dynamic_shared_memory<float>();
  const int n = blockDim.x, t = threadIdx.x;
  first_seen[blockIdx.x * n + t] = buf[t];  // before anyone wrote: the 0xFF fill
  __syncthreads();
  buf[t] = in[blockIdx.x * n + t];
  __syncthreads();
  int src = 0;
  for (int d = 1; d < n; d *= 2) {
    const float v = buf[src * n + t] + (t >= d ? buf[src * n + t - d] : 0.0f);
    buf[(1 - src) * n + t] = v;
    src = 1 - src;
    __syncthreads();
  }
  out[blockIdx.x * n + t] = buf[src * n + t];
}

TEST_F(EmuTest, DynamicSharedMemoryIsPerBlockAndStartsAsNaN) {
  const int n = 200, blocks = 3;
  std::vector<float> in(n * blocks);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i % 7) - 2.0f;
  DeviceArray<float> d_in(in), d_out(in.size()), d_seen(in.size());
  launch<prefix_sum_dynamic>(dim3(blocks), dim3(n), 2 * n * sizeof(float), nullptr, d_in.get(), d_out.get(),
                             d_seen.get());
  const std::vector<float> out = d_out.download(), seen = d_seen.download();
  for (int b = 0; b < blocks; ++b) {
    float sum = 0;
    for (int t = 0; t < n; ++t) {
      sum += in[b * n + t];
      EXPECT_EQ(out[b * n + t], sum) << b << " " << t;
      uint32_t bits;
      std::memcpy(&bits, &seen[b * n + t], 4);
      EXPECT_EQ(bits, 0xFFFFFFFFu);
    }
  }
}

__global__ void divergent_barrier(int* out) {
  if (threadIdx.x < 40) __syncthreads();
  out[threadIdx.x] = 1;
}

TEST_F(EmuTest, DivergentBarrierIsReportedAsADeadlockNamingTheKernel) {
  DeviceArray<int> out(64);
  // emu::launch, without the launch helper's error check: the kernel runs asynchronously and may already
  // have failed (a sticky error) when that check would run. Failing kernels are launched so throughout.
  emu::launch<divergent_barrier>(dim3(2), dim3(64), 0, nullptr, out.get());
  const cudaError_t e = cudaDeviceSynchronize();
  ASSERT_EQ(e, cudaErrorLaunchFailure);
  const std::string text = error_text(e);
  EXPECT_NE(text.find("deadlock in kernel '"), std::string::npos) << text;
  EXPECT_NE(text.find("divergent_barrier' block ("), std::string::npos) << text;  // either block fails first
  EXPECT_NE(text.find(",0,0) of 64 threads"), std::string::npos) << text;
  EXPECT_NE(text.find("threads 0-39 wait at __syncthreads"), std::string::npos) << text;
  EXPECT_NE(text.find("threads 40-63 have exited"), std::string::npos) << text;
  // Sticky, as a CUDA context after a failed kernel: every later call reports it until a reset.
  void* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, 16), cudaErrorLaunchFailure);
  EXPECT_EQ(cudaGetLastError(), cudaErrorLaunchFailure);
  EXPECT_EQ(cudaGetLastError(), cudaErrorLaunchFailure);
  EXPECT_THROW(CUDA_CHECK(cudaStreamSynchronize(nullptr)), gpt::Error);
}

__global__ void throws_in_one_thread(int* out) {
  GPT_CHECK(threadIdx.x != 5, "thread {} refuses", threadIdx.x);
  __syncthreads();
  out[threadIdx.x] = 1;
}

TEST_F(EmuTest, AnErrorInOneThreadFailsTheKernelWithItsPlace) {
  DeviceArray<int> out(32);
  emu::launch<throws_in_one_thread>(dim3(1), dim3(32), 0, nullptr, out.get());
  const cudaError_t e = cudaDeviceSynchronize();
  ASSERT_EQ(e, cudaErrorLaunchFailure);
  EXPECT_NE(error_text(e).find("block (0,0,0) thread (5,0,0): thread 5 refuses"), std::string::npos)
      << error_text(e);
  // The other threads were unwound from their barrier; the device works again after a reset.
  cudaDeviceReset();
  const std::vector<int> in = iota_vector(256);
  DeviceArray<int> d_in(in), d_out(256);
  launch<reverse_in_shared<true>>(dim3(1), dim3(256), 0, nullptr, d_in.get(), d_out.get());
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_TRUE(reversed(in, d_out.download()));
}

__global__ void noop_kernel(int*) {}

TEST_F(EmuTest, LaunchConfigurationErrorsAreTheCallersLastError) {
  EXPECT_THROW(launch<noop_kernel>(dim3(1), dim3(1025), 0, nullptr, nullptr), gpt::Error);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);  // CUDA_CHECK consumed it; not sticky
  emu::launch<noop_kernel>(dim3(1), dim3(32, 32, 2), 0, nullptr, nullptr);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  emu::launch<noop_kernel>(dim3(1, 70000), dim3(32), 0, nullptr, nullptr);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  emu::launch<noop_kernel>(dim3(0), dim3(32), 0, nullptr, nullptr);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);

  // Over 48 KiB of dynamic shared memory needs the opt-in attribute, and at most 227 KiB with it.
  emu::launch<noop_kernel>(dim3(1), dim3(32), 64 << 10, nullptr, nullptr);
  const cudaError_t e = cudaGetLastError();
  EXPECT_EQ(e, cudaErrorInvalidValue);
  EXPECT_NE(error_text(e).find("cudaFuncSetAttribute"), std::string::npos) << error_text(e);
  ASSERT_EQ(cudaFuncSetAttribute(noop_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 100 << 10), cudaSuccess);
  launch<noop_kernel>(dim3(1), dim3(32), 64 << 10, nullptr, nullptr);
  emu::launch<noop_kernel>(dim3(1), dim3(32), 101 << 10, nullptr, nullptr);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
  EXPECT_EQ(cudaFuncSetAttribute(noop_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 228 << 10),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

// A kernel's parameters are its own copies: each thread may change them without affecting another.
__global__ void count_down(int n, int* out) {
  int steps = 0;
  for (; n > 0; --n) ++steps;
  out[threadIdx.x] = steps;
}

TEST_F(EmuTest, ParametersAreCopiedPerThreadAndOutliveTheCaller) {
  DeviceArray<int> out(16);
  {
    int n = 9;
    launch<count_down>(dim3(1), dim3(16), 0, nullptr, n, out.get());
    n = 0;
  }
  for (int v : out.download()) EXPECT_EQ(v, 9);
}

}  // namespace
}  // namespace gpt::cuda::test

namespace gpt::cuda::test {
namespace {

// CUDA_LAUNCH_BLOCKING=1 makes each launch wait for its kernel, so the launch helper's own check reports
// the failure. The variable is read once per process: tests/CMakeLists.txt runs this suite on its own.
TEST(EmuLaunchBlocking, AFailingKernelFailsItsOwnLaunch) {
  const char* env = std::getenv("CUDA_LAUNCH_BLOCKING");
  if (env == nullptr || std::string(env) != "1") GTEST_SKIP() << "needs CUDA_LAUNCH_BLOCKING=1 (its own ctest entry)";
  {
    DeviceArray<int> out(64);
    try {
      launch<divergent_barrier>(dim3(1), dim3(64), 0, nullptr, out.get());
      ADD_FAILURE() << "the launch returned";
    } catch (const gpt::Error& e) {
      EXPECT_NE(std::string(e.what()).find("deadlock"), std::string::npos) << e.what();
    }
  }
  cudaDeviceReset();
}

}  // namespace
}  // namespace gpt::cuda::test

namespace gpt::cuda::test {
namespace {

// GPT_CUDA_EMU_SEED sets the schedule seed of the whole process (its own ctest entry sets it to 7).
TEST(EmuSeedFromEnvironment, SetsTheScheduleSeed) {
  const char* env = std::getenv("GPT_CUDA_EMU_SEED");
  if (env == nullptr) GTEST_SKIP() << "needs GPT_CUDA_EMU_SEED (its own ctest entry)";
  EXPECT_EQ(emu::schedule_seed(), std::strtoull(env, nullptr, 0));
}

}  // namespace
}  // namespace gpt::cuda::test
