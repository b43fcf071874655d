// The MPI communicator's collectives on 2 ranks, blocking and asynchronous, and its timeout.
#include "mpi_test_util.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <numeric>
#include <thread>
#include <vector>

namespace gpt::test {
namespace {

TEST(MpiCommunicator, RanksAndLocalRanks) {
  Communicator& c = world();
  EXPECT_EQ(c.name(), "mpi");
  EXPECT_GE(c.world_size(), 2);
  EXPECT_GE(c.rank(), 0);
  EXPECT_LT(c.local_rank(), c.local_size());
  // The node's ranks by local rank: this one at its local rank (the host-memory check sums them).
  const std::vector<int> node = c.node_ranks();
  ASSERT_EQ(static_cast<int>(node.size()), c.local_size());
  EXPECT_EQ(node[static_cast<size_t>(c.local_rank())], c.rank());
  int32_t ranks = c.rank();
  c.all_reduce_sum(Tensor(&ranks, {1}, DType::I32));
  EXPECT_EQ(ranks, c.world_size() * (c.world_size() - 1) / 2);
}

TEST(MpiCommunicator, AllReduceReduceScatterAllGatherBroadcast) {
  Communicator& c = world();
  const int W = c.world_size(), r = c.rank();
  std::vector<float> x(1000);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i) + 1000.0f * r;
  CommHandle h = c.all_reduce_sum_async(Tensor(x.data(), {1000}));
  h.wait();
  EXPECT_FALSE(h.pending());
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(x[i], W * static_cast<float>(i) + 1000.0f * W * (W - 1) / 2);

  std::vector<double> whole(static_cast<size_t>(W) * 5), chunk(5);
  std::iota(whole.begin(), whole.end(), 10.0 * r);
  c.reduce_scatter_sum(Tensor(whole.data(), {W * 5}, DType::F64), Tensor(chunk.data(), {5}, DType::F64));
  for (int i = 0; i < 5; ++i) EXPECT_EQ(chunk[i], W * (r * 5.0 + i) + 10.0 * W * (W - 1) / 2);

  // In place: each rank's chunk already sits at its place in out.
  std::vector<int32_t> gathered(static_cast<size_t>(W) * 3, -1);
  for (int i = 0; i < 3; ++i) gathered[static_cast<size_t>(r) * 3 + i] = 100 * r + i;
  Tensor out(gathered.data(), {W * 3}, DType::I32);
  c.all_gather(out.elements(r * 3, 3), out);
  for (int q = 0; q < W; ++q)
    for (int i = 0; i < 3; ++i) EXPECT_EQ(gathered[static_cast<size_t>(q) * 3 + i], 100 * q + i);
  // From a separate buffer.
  std::vector<float> mine = {static_cast<float>(r)}, all(static_cast<size_t>(W));
  c.all_gather(Tensor(mine.data(), {1}), Tensor(all.data(), {W}));
  for (int q = 0; q < W; ++q) EXPECT_EQ(all[q], static_cast<float>(q));

  std::vector<int32_t> most = {r, -r, r == 1 ? INT32_MAX : INT32_MIN};
  c.all_reduce_max(Tensor(most.data(), {3}, DType::I32));
  EXPECT_EQ(most, (std::vector<int32_t>{W - 1, 0, INT32_MAX}));
  EXPECT_THROW(c.all_reduce_max(Tensor(x.data(), {1000})), Error) << "only i32 values are maxed";

  int32_t value = r == 1 ? 77 : 0;
  c.broadcast(Tensor(&value, {1}, DType::I32), 1);
  EXPECT_EQ(value, 77);
  c.barrier();
}

TEST(MpiCommunicator, ManyOutstandingOperationsCompleteInAnyWaitOrder) {
  Communicator& c = world();
  std::vector<std::vector<float>> buffers(20, std::vector<float>(64, 1.0f));
  std::vector<CommHandle> handles;
  for (auto& b : buffers) handles.push_back(c.all_reduce_sum_async(Tensor(b.data(), {64})));
  c.poll();
  for (size_t i = handles.size(); i-- > 0;) handles[i].wait();
  for (const auto& b : buffers) EXPECT_EQ(b[63], static_cast<float>(c.world_size()));
}

TEST(MpiCommunicator, MismatchedShapesAreErrors) {
  std::vector<float> a(6), b(4);
  EXPECT_THROW(world().reduce_scatter_sum(Tensor(a.data(), {6}), Tensor(b.data(), {4})), Error);
}

// Rank 0 joins the all-reduce 5 s late; rank 1, allowing 1 s, gets an error naming it and the operation.
// The operation stays pending: once rank 0 arrives it completes.
TEST(MpiTimeout, ACollectiveThatDoesNotCompleteNamesTheWaitingRankAndTheOneThatDidNotArrive) {
  Communicator& c = world();
  const double before = c.timeout_s();
  float x = 1.0f;
  if (c.rank() == 0) {
    std::this_thread::sleep_for(std::chrono::seconds(5));
    c.all_reduce_sum(Tensor(&x, {1}));
  } else {
    c.set_timeout(1.0);
    CommHandle h = c.all_reduce_sum_async(Tensor(&x, {1}));
    const auto start = std::chrono::steady_clock::now();
    const std::string message = error_message([&] { h.wait(); });
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_NE(message.find("rank 1 of"), std::string::npos) << message;
    EXPECT_NE(message.find("rank 0 has not reached it"), std::string::npos) << message;
    EXPECT_NE(message.find("all_reduce_sum"), std::string::npos) << message;
    EXPECT_NE(message.find("dist.timeout_s"), std::string::npos) << message;
    EXPECT_GE(waited, 1.0);
    EXPECT_TRUE(h.pending());
    c.set_timeout(before);
    h.wait();
  }
  c.set_timeout(before);
  EXPECT_EQ(x, static_cast<float>(c.world_size()));
}

}  // namespace
}  // namespace gpt::test
