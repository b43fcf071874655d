// Warp primitives against the CUDA Programming Guide and the PTX ISA: shuffles with widths and partial
// masks, votes, redux, __syncwarp, the misuse the emulator refuses, and atomics from many blocks.
#include <gtest/gtest.h>

#include <cstring>

#include "common/launch.cuh"
#include "cuda/emu/emu_test_util.h"

namespace gpt::cuda::test {
namespace {

constexpr unsigned kFull = 0xFFFFFFFFu;

// out[k * 32 + lane] for the k-th shuffle of a 32-thread block; each lane's value is 100 + lane.
__global__ void shuffles(int* out) {
  const int lane = threadIdx.x;
  const int v = 100 + lane;
  int k = 0;
  out[k++ * 32 + lane] = __shfl_sync(kFull, v, (lane * 7 + 3) % 32);
  out[k++ * 32 + lane] = __shfl_sync(kFull, v, 2, 8);     // lane 2 of each group of 8
  out[k++ * 32 + lane] = __shfl_sync(kFull, v, 13, 8);    // 13 mod 8
  out[k++ * 32 + lane] = __shfl_sync(kFull, v, -1, 16);   // -1 mod 16
  out[k++ * 32 + lane] = __shfl_up_sync(kFull, v, 3);
  out[k++ * 32 + lane] = __shfl_up_sync(kFull, v, 3, 8);
  out[k++ * 32 + lane] = __shfl_down_sync(kFull, v, 5);
  out[k++ * 32 + lane] = __shfl_down_sync(kFull, v, 5, 16);
  out[k++ * 32 + lane] = __shfl_xor_sync(kFull, v, 6);
  out[k++ * 32 + lane] = __shfl_xor_sync(kFull, v, 12, 8);  // bits above the width reach earlier groups only
}

int expected_shuffle(int k, int lane) {
  auto seg = [&](int w) { return lane / w * w; };
  switch (k) {
    case 0: return 100 + (lane * 7 + 3) % 32;
    case 1: return 100 + seg(8) + 2;
    case 2: return 100 + seg(8) + 5;
    case 3: return 100 + seg(16) + 15;
    case 4: return 100 + (lane >= 3 ? lane - 3 : lane);
    case 5: return 100 + (lane % 8 >= 3 ? lane - 3 : lane);
    case 6: return 100 + (lane + 5 < 32 ? lane + 5 : lane);
    case 7: return 100 + (lane % 16 + 5 < 16 ? lane + 5 : lane);
    case 8: return 100 + (lane ^ 6);
    case 9: {
      const int j = lane ^ 12;
      return 100 + (j <= seg(8) + 7 ? j : lane);
    }
  }
  return -1;
}

TEST_F(EmuTest, ShufflesFollowThePtxLaneArithmetic) {
  DeviceArray<int> out(10 * 32);
  launch<shuffles>(dim3(1), dim3(32), 0, nullptr, out.get());
  const std::vector<int> got = out.download();
  for (int k = 0; k < 10; ++k)
    for (int lane = 0; lane < 32; ++lane) EXPECT_EQ(got[k * 32 + lane], expected_shuffle(k, lane)) << k << " " << lane;
}

// Shuffles of 8-byte and 2-byte types move the whole value.
__global__ void wide_shuffles(double* d, unsigned short* h) {
  const int lane = threadIdx.x;
  d[lane] = __shfl_xor_sync(kFull, 1.0 / (lane + 1) + 1e300, 1);
  h[lane] = __shfl_down_sync(kFull, static_cast<unsigned short>(0xAB00 + lane), 1);
}

TEST_F(EmuTest, ShufflesMoveEightAndTwoByteValues) {
  DeviceArray<double> d(32);
  DeviceArray<unsigned short> h(32);
  launch<wide_shuffles>(dim3(1), dim3(32), 0, nullptr, d.get(), h.get());
  const std::vector<double> dv = d.download();
  const std::vector<unsigned short> hv = h.download();
  for (int lane = 0; lane < 32; ++lane) {
    EXPECT_EQ(dv[lane], 1.0 / ((lane ^ 1) + 1) + 1e300);
    EXPECT_EQ(hv[lane], 0xAB00 + (lane < 31 ? lane + 1 : lane));
  }
}

// Two halves of a warp in divergent branches, each shuffling, voting and syncing among its own lanes:
// two rendezvous, neither waiting for the other's lanes.
__global__ void divergent_halves(int* out, unsigned* ballots) {
  const int lane = threadIdx.x;
  if (lane < 16) {
    const unsigned m = 0x0000FFFFu;
    out[lane] = __shfl_down_sync(m, lane * 10, 4);  // lanes 12-15 read lanes 16-19: outside the mask
    __syncwarp(m);
    ballots[lane] = __ballot_sync(m, lane % 3 == 0);
  } else {
    const unsigned m = 0xFFFF0000u;
    out[lane] = __shfl_sync(m, lane * 10, 16);
    ballots[lane] = __ballot_sync(m, lane >= 30) | (__all_sync(m, lane >= 16) << 1) | (__any_sync(m, lane == 99) << 2);
  }
}

TEST_F(EmuTest, PartialMasksAreRendezvousOfTheirOwnLanes) {
  DeviceArray<int> out(32);
  DeviceArray<unsigned> ballots(32);
  launch<divergent_halves>(dim3(1), dim3(32), 0, nullptr, out.get(), ballots.get());
  const std::vector<int> got = out.download();
  const std::vector<unsigned> b = ballots.download();
  for (int lane = 0; lane < 12; ++lane) EXPECT_EQ(got[lane], (lane + 4) * 10);
  for (int lane = 12; lane < 16; ++lane) EXPECT_EQ(static_cast<unsigned>(got[lane]), 0xFFFFFFFFu) << "undefined read";
  for (int lane = 16; lane < 32; ++lane) EXPECT_EQ(got[lane], 160);
  for (int lane = 0; lane < 16; ++lane) EXPECT_EQ(b[lane], 0x9249u);  // lanes 0, 3, 6, 9, 12, 15
  for (int lane = 16; lane < 32; ++lane) EXPECT_EQ(b[lane], 0xC0000000u | 0x2u);
}

__global__ void redux(unsigned* out) {
  const unsigned lane = threadIdx.x;
  out[lane] = __reduce_add_sync(kFull, lane + 1);
  out[32 + lane] = static_cast<unsigned>(__reduce_min_sync(kFull, static_cast<int>(lane) - 7));
  out[64 + lane] = __reduce_max_sync(lane % 16 < 8 ? 0x00FF00FFu : 0xFF00FF00u, lane * 3);
}

TEST_F(EmuTest, ReduxOverTheMask) {
  DeviceArray<unsigned> out(96);
  launch<redux>(dim3(1), dim3(32), 0, nullptr, out.get());
  const std::vector<unsigned> got = out.download();
  for (unsigned lane = 0; lane < 32; ++lane) {
    EXPECT_EQ(got[lane], 528u);
    EXPECT_EQ(static_cast<int>(got[32 + lane]), -7);
    const bool low = lane < 8 || (lane >= 16 && lane < 24);
    EXPECT_EQ(got[64 + lane], low ? 23u * 3 : 31u * 3) << lane;
  }
}

__global__ void lane_outside_mask(int* out) { out[threadIdx.x] = __shfl_sync(0x1u, 1, 0); }
__global__ void mask_names_missing_lanes(int* out) { out[threadIdx.x] = __shfl_sync(kFull, 1, 0); }
__global__ void mixed_collectives(int* out) {
  out[threadIdx.x] = threadIdx.x == 0 ? static_cast<int>(__ballot_sync(kFull, 1)) : __shfl_sync(kFull, 1, 0);
}
__global__ void exited_lane(int* out) {
  if (threadIdx.x == 7) return;
  out[threadIdx.x] = __any_sync(kFull, 1);
}

std::string failure_of_launch(void (*run)(int*)) {
  std::string text;
  {
    DeviceArray<int> out(64);
    run(out.get());
    const cudaError_t e = cudaDeviceSynchronize();
    text = e == cudaErrorLaunchFailure ? error_text(e) : "no failure";
  }
  cudaDeviceReset();
  return text;
}

TEST_F(EmuTest, MisusedWarpCollectivesAreErrors) {
  std::string t = failure_of_launch([](int* o) { emu::launch<lane_outside_mask>(dim3(1), dim3(32), 0, nullptr, o); });
  EXPECT_NE(t.find("__shfl_sync with mask 0x00000001: the calling lane"), std::string::npos) << t;
  t = failure_of_launch([](int* o) { emu::launch<mask_names_missing_lanes>(dim3(1), dim3(48), 0, nullptr, o); });
  EXPECT_NE(t.find("the mask names lanes that do not exist (warp 1 has 16 threads)"), std::string::npos) << t;
  t = failure_of_launch([](int* o) { emu::launch<mixed_collectives>(dim3(1), dim3(32), 0, nullptr, o); });
  EXPECT_NE(t.find("met at different warp collectives"), std::string::npos) << t;
  t = failure_of_launch([](int* o) { emu::launch<exited_lane>(dim3(1), dim3(32), 0, nullptr, o); });
  EXPECT_NE(t.find("deadlock"), std::string::npos) << t;
  EXPECT_NE(t.find("threads 7 have exited"), std::string::npos) << t;
  EXPECT_NE(t.find("wait at __any_sync with mask 0xffffffff"), std::string::npos) << t;
}

// A warp-synchronous tree sum through shared memory. Without __syncwarp it relies on lanes running in
// lock-step, which Volta's independent thread scheduling does not promise; the emulator runs the lanes
// one after another in a shuffled order, so the missing __syncwarp shows.
template <bool kSync>
__global__ void warp_tree_sum(const int* in, int* out) {
  __shared__ int s[32];
  const int lane = threadIdx.x;
  s[lane] = in[lane];
  if (kSync) __syncwarp();
  for (int offset = 16; offset > 0; offset /= 2) {
    const int v = lane < offset ? s[lane] + s[lane + offset] : 0;
    if (kSync) __syncwarp();
    if (lane < offset) s[lane] = v;
    if (kSync) __syncwarp();
  }
  if (lane == 0) *out = s[0];
}

TEST_F(EmuTest, MissingSyncwarpIsCaughtAndSyncwarpFixesIt) {
  int caught = 0;
  for (uint64_t seed = 0; seed < 4; ++seed) {
    emu::set_schedule_seed(seed);
    std::vector<int> in(32);
    int sum = 0;
    for (int i = 0; i < 32; ++i) sum += in[i] = static_cast<int>(seed * 1000) + i * i;
    DeviceArray<int> d_in(in), out(1);
    launch<warp_tree_sum<true>>(dim3(1), dim3(32), 0, nullptr, d_in.get(), out.get());
    EXPECT_EQ(out.download()[0], sum) << "seed " << seed;
    launch<warp_tree_sum<false>>(dim3(1), dim3(32), 0, nullptr, d_in.get(), out.get());
    caught += out.download()[0] != sum;
  }
  EXPECT_EQ(caught, 4) << "the kernel without __syncwarp summed right under some seeds";
}

// Many blocks on several host threads: the atomics must be real ones.
__global__ void atomics(int* i, unsigned* u, unsigned long long* ull, float* f, double* d, int* mx, int* mn,
                        unsigned* exch_count, double* cas_sum) {
  const int g = blockIdx.x * blockDim.x + threadIdx.x;
  atomicAdd(i, 1);
  atomicAdd(u, 2u);
  atomicAdd(ull, 3ull);
  atomicAdd(f, 0.5f);
  atomicAdd(d, 0.25);
  atomicMax(mx, (g * 7919) % 10007);
  atomicMin(mn, 5000 - g);
  if (atomicExch(exch_count, 1u) == 0u) atomicAdd(i, 1000000);  // exactly one thread sees the 0
  // A double add from atomicCAS, as kernels write it for types without an atomicAdd.
  auto* bits = reinterpret_cast<unsigned long long*>(cas_sum);
  unsigned long long old = *bits, assumed;
  do {
    assumed = old;
    double v;
    std::memcpy(&v, &assumed, 8);
    v += 1.0;
    unsigned long long next;
    std::memcpy(&next, &v, 8);
    old = atomicCAS(bits, assumed, next);
  } while (old != assumed);
}

TEST_F(EmuTest, AtomicsFromManyBlocksAddUp) {
  DeviceArray<int> i(std::vector<int>{0}), mx(std::vector<int>{-1}), mn(std::vector<int>{1 << 30});
  DeviceArray<unsigned> u(std::vector<unsigned>{0}), exch(std::vector<unsigned>{0});
  DeviceArray<unsigned long long> ull(std::vector<unsigned long long>{0});
  DeviceArray<float> f(std::vector<float>{0});
  DeviceArray<double> d(std::vector<double>{0}), cas(std::vector<double>{0});
  const int blocks = 64, threads = 128, n = blocks * threads;
  launch<atomics>(dim3(blocks), dim3(threads), 0, nullptr, i.get(), u.get(), ull.get(), f.get(), d.get(), mx.get(),
                  mn.get(), exch.get(), cas.get());
  EXPECT_EQ(i.download()[0], n + 1000000);
  EXPECT_EQ(u.download()[0], 2u * n);
  EXPECT_EQ(ull.download()[0], 3ull * n);
  EXPECT_EQ(f.download()[0], 0.5f * n);  // exact: every partial sum is a multiple of 0.5 below 2^24
  EXPECT_EQ(d.download()[0], 0.25 * n);
  int expect_max = -1;
  for (int g = 0; g < n; ++g) expect_max = std::max(expect_max, (g * 7919) % 10007);
  EXPECT_EQ(mx.download()[0], expect_max);
  EXPECT_EQ(mn.download()[0], 5000 - (n - 1));
  EXPECT_EQ(cas.download()[0], static_cast<double>(n));
}

}  // namespace
}  // namespace gpt::cuda::test
