// The one-process communicator: every collective is complete on return and reduces over a world of one.
#include "dist/single_communicator.h"

#include "test_util.h"

#include <gtest/gtest.h>

namespace gpt::test {
namespace {

TEST(SingleCommunicator, IsAWorldOfOne) {
  SingleCommunicator c;
  EXPECT_EQ(c.rank(), 0);
  EXPECT_EQ(c.world_size(), 1);
  EXPECT_EQ(c.local_rank(), 0);
  EXPECT_EQ(c.local_size(), 1);
  std::vector<float> x = {1.5f, -2.0f};
  CommHandle h = c.all_reduce_sum_async(Tensor(x.data(), {2}));
  EXPECT_FALSE(h.pending());
  h.wait();
  EXPECT_EQ(x, (std::vector<float>{1.5f, -2.0f}));
  std::vector<int32_t> m = {7, -3};
  c.all_reduce_max(Tensor(m.data(), {2}, DType::I32));
  EXPECT_EQ(m, (std::vector<int32_t>{7, -3}));
  EXPECT_THROW(c.all_reduce_max(Tensor(x.data(), {2})), Error);
  c.broadcast(Tensor(x.data(), {2}), 0);
  c.barrier();
  EXPECT_THROW(c.broadcast(Tensor(x.data(), {2}), 1), Error);
}

TEST(SingleCommunicator, ReduceScatterAndAllGatherCopy) {
  SingleCommunicator c;
  std::vector<double> in = {1, 2, 3}, out(3, 0.0);
  c.reduce_scatter_sum(Tensor(in.data(), {3}, DType::F64), Tensor(out.data(), {3}, DType::F64));
  EXPECT_EQ(out, in);
  std::vector<double> gathered(3, 0.0);
  c.all_gather(Tensor(in.data(), {3}, DType::F64), Tensor(gathered.data(), {3}, DType::F64));
  EXPECT_EQ(gathered, in);
  std::vector<float> wrong(2);
  EXPECT_THROW(c.all_gather(Tensor(in.data(), {3}, DType::F64), Tensor(wrong.data(), {2})), Error);
}

}  // namespace
}  // namespace gpt::test
