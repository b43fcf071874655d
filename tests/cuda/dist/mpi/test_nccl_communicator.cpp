// The NCCL communicator's collectives on device buffers against sums and maxes computed on the host, with
// random inputs and poisoned outputs, and its watchdog: a collective one rank issues and the other does
// not join in time aborts the communicator with a message naming the rank, the operation and the rank
// that never issued it.
#include "backend/cuda_entry.h"
#include "mpi_test_util.h"

#include "precision/float_formats.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <thread>

namespace gpt::test {
namespace {

struct NcclRig {
  std::unique_ptr<Backend> backend = cuda::make_backend({});
  std::unique_ptr<Communicator> comm = backend->make_communicator(world());

  // A device buffer of n values, or of n poison values (NaN) when `values` is empty.
  Tensor upload(const std::vector<float>& values, int64_t n) {
    void* p = backend->allocate(static_cast<size_t>(n) * sizeof(float));
    buffers.push_back(p);
    std::vector<float> host = values.empty() ? std::vector<float>(static_cast<size_t>(n), std::nanf("")) : values;
    backend->copy_to_device(p, host.data(), host.size() * sizeof(float));
    return Tensor(p, {n}, DType::F32, Device::CUDA);
  }
  std::vector<float> download(const Tensor& t) {
    std::vector<float> host(static_cast<size_t>(t.numel()));
    backend->copy_to_host(host.data(), t.data, host.size() * sizeof(float));
    return host;
  }
  ~NcclRig() {
    comm.reset();
    for (void* p : buffers) backend->deallocate(p);
  }
  std::vector<void*> buffers;
};

// Rank r's values of a test: the same generator on every rank, so each can compute the others'.
std::vector<float> values_of(int rank, int64_t n, uint32_t seed) {
  std::mt19937 rng(seed * 131 + static_cast<uint32_t>(rank));
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = std::uniform_real_distribution<float>(-1, 1)(rng);
  return v;
}

TEST(NcclCommunicator, CollectivesMatchTheHostArithmetic) {
  NcclRig d;
  ASSERT_EQ(d.comm->name(), "nccl");
  const int W = d.comm->world_size(), r = d.comm->rank();
  const int64_t n = 1000 + 37;  // not a multiple of anything the emulation might favour
  std::vector<std::vector<float>> all;
  for (int q = 0; q < W; ++q) all.push_back(values_of(q, n * W, 1));

  // all-reduce (in place), two in flight at once and waited in order
  Tensor a = d.upload(all[static_cast<size_t>(r)], n * W), b = d.upload(values_of(r, n, 2), n);
  CommHandle ha = d.comm->all_reduce_sum_async(a), hb = d.comm->all_reduce_sum_async(b);
  ha.wait();
  hb.wait();
  std::vector<float> sum(static_cast<size_t>(n * W), 0.0f), sum_b(static_cast<size_t>(n), 0.0f);
  for (int q = 0; q < W; ++q) {
    const std::vector<float> vb = values_of(q, n, 2);
    for (size_t i = 0; i < sum.size(); ++i) sum[i] += all[static_cast<size_t>(q)][i];
    for (size_t i = 0; i < sum_b.size(); ++i) sum_b[i] += vb[i];
  }
  EXPECT_EQ(d.download(a), sum);  // 2 ranks: one addition, the same on both sides
  EXPECT_EQ(d.download(b), sum_b);

  // reduce-scatter into a separate poisoned chunk
  Tensor whole = d.upload(all[static_cast<size_t>(r)], n * W), chunk = d.upload({}, n);
  d.comm->reduce_scatter_sum(whole, chunk);
  EXPECT_EQ(d.download(chunk), std::vector<float>(sum.begin() + r * n, sum.begin() + (r + 1) * n));

  // all-gather, in place (the rank's own chunk of the output) and from a separate buffer
  Tensor gathered = d.upload({}, n * W);
  Tensor own = d.upload(values_of(r, n, 3), n);
  d.comm->all_gather(own, gathered);
  std::vector<float> expected;
  for (int q = 0; q < W; ++q) {
    const std::vector<float> v = values_of(q, n, 3);
    expected.insert(expected.end(), v.begin(), v.end());
  }
  EXPECT_EQ(d.download(gathered), expected);
  std::vector<float> in_place_host(static_cast<size_t>(n * W), std::nanf(""));
  const std::vector<float> mine = values_of(r, n, 3);
  std::copy(mine.begin(), mine.end(), in_place_host.begin() + r * n);
  Tensor in_place = d.upload(in_place_host, n * W);
  d.comm->all_gather(in_place.elements(r * n, n), in_place);
  EXPECT_EQ(d.download(in_place), expected);

  // broadcast from the last rank
  Tensor bc = d.upload(values_of(r, n, 4), n);
  d.comm->broadcast(bc, W - 1);
  EXPECT_EQ(d.download(bc), values_of(W - 1, n, 4));

  // max of i32 values over the whole range, in place
  auto ints_of = [&](int q) {
    std::mt19937 rng(700 + static_cast<uint32_t>(q));
    std::vector<int32_t> v(static_cast<size_t>(n));
    for (int32_t& x : v) x = static_cast<int32_t>(rng());
    return v;
  };
  std::vector<int32_t> ints = ints_of(r), max = ints;
  for (int q = 0; q < W; ++q)
    for (size_t i = 0; i < max.size(); ++i) max[i] = std::max(max[i], ints_of(q)[i]);
  Tensor m = d.upload({}, n);
  d.backend->copy_to_device(m.data, ints.data(), ints.size() * sizeof(int32_t));
  d.comm->all_reduce_max(Tensor(m.data, {n}, DType::I32, Device::CUDA));
  std::vector<int32_t> got(static_cast<size_t>(n));
  d.backend->copy_to_host(got.data(), m.data, got.size() * sizeof(int32_t));
  EXPECT_EQ(got, max);
  EXPECT_THROW(d.comm->all_reduce_max(m), Error) << "a float max would drop NaNs; only i32 is maxed";
}

// bf16 sums: each addition in f32, rounded to bf16 once, as NCCL's kernels add.
TEST(NcclCommunicator, Bf16AllReduceRoundsEachAddition) {
  NcclRig d;
  ASSERT_TRUE(d.comm->sums(DType::BF16));
  const int W = d.comm->world_size(), r = d.comm->rank();
  const int64_t n = 515;
  auto codes = [&](int q) {
    std::vector<uint16_t> c;
    for (float x : values_of(q, n, 5)) c.push_back(f32_to_bf16(x));
    return c;
  };
  std::vector<uint16_t> mine = codes(r);
  void* p = d.backend->allocate(static_cast<size_t>(n) * 2);
  d.buffers.push_back(p);
  d.backend->copy_to_device(p, mine.data(), mine.size() * 2);
  d.comm->all_reduce_sum(Tensor(p, {n}, DType::BF16, Device::CUDA));
  std::vector<uint16_t> got(static_cast<size_t>(n));
  d.backend->copy_to_host(got.data(), p, got.size() * 2);
  ASSERT_EQ(W, 2) << "the expected values below are those of 2 ranks";
  const std::vector<uint16_t> c0 = codes(0), c1 = codes(1);
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_EQ(got[i], f32_to_bf16(bf16_to_f32(c0[i]) + bf16_to_f32(c1[i]))) << "element " << i;
}

// Rank 1 joins rank 0's all-reduce only after rank 0's 1 s timeout: rank 0's watchdog aborts the
// communicator, which also releases the compute stream waiting on the collective, and every later call
// on rank 0 throws the watchdog's message, which names rank 1 as the one that never issued it. Rank 1's
// late all-reduce then completes against rank 0's abandoned one, so both ranks leave cleanly.
TEST(NcclCommunicator, WatchdogAbortsACollectiveThatTimesOut) {
  NcclRig d;
  const int r = d.comm->rank();
  Tensor buf = d.upload(values_of(r, 1000, 6), 1000);
  if (r == 0) {
    d.comm->set_timeout(1.0);
    const auto start = std::chrono::steady_clock::now();
    d.comm->all_reduce_sum(buf);  // returns at once: the compute stream waits, not the host
    d.backend->synchronize();     // blocked behind the collective until the watchdog aborts it
    std::string message;
    try {
      d.comm->poll();
    } catch (const std::exception& e) {
      message = e.what();
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    // Collectives are numbered over the job (the world's included), so the number is the board's.
    EXPECT_NE(message.find("rank 0 of 2: NCCL all_reduce_sum of 1000 f32 values (its collective #"), std::string::npos)
        << message;
    EXPECT_NE(message.find("has not completed within 1 s (dist.timeout_s): rank 1 has not reached it"),
              std::string::npos)
        << message;
    EXPECT_GE(seconds, 1.0);
    EXPECT_LT(seconds, 5.0);
    EXPECT_THROW(d.comm->all_reduce_sum(buf), Error) << "an aborted communicator must refuse new collectives";
    std::printf("rank 0: the watchdog ended the collective %.2f s after it was issued\n", seconds);
  } else {
    std::this_thread::sleep_for(std::chrono::milliseconds(2500));
    d.comm->all_reduce_sum(buf);
    d.backend->synchronize();
  }
  world().barrier();
}

}  // namespace
}  // namespace gpt::test
