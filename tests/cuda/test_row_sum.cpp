// cuda/common/row_sum.cu on the emulator: one block per row, warp butterflies then warps in order,
// against a double-precision sum (FP32 accumulation of n terms: error within n * eps * sum |x|).
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "common/row_sum.h"
#include "cuda/emu/emu_test_util.h"

namespace gpt::cuda::test {
namespace {

void check_row_sum(int rows, int cols, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(rows) * cols);
  for (float& v : x) v = dist(rng);
  DeviceArray<float> d_x(x), d_out(rows);
  row_sum(d_x.get(), d_out.get(), rows, cols, nullptr);
  const std::vector<float> out = d_out.download();
  for (int r = 0; r < rows; ++r) {
    double sum = 0, abs_sum = 0;
    for (int c = 0; c < cols; ++c) {
      sum += x[static_cast<size_t>(r) * cols + c];
      abs_sum += std::fabs(x[static_cast<size_t>(r) * cols + c]);
    }
    EXPECT_NEAR(out[r], sum, cols * 0x1p-24 * abs_sum) << rows << "x" << cols << " row " << r;
  }
}

TEST_F(EmuTest, RowSumMatchesADoubleSum) {
  check_row_sum(256, 256, 1);
  check_row_sum(3, 1000, 2);   // not a multiple of the block
  check_row_sum(5, 7, 3);      // fewer columns than threads
}

// The block's partials are added in a fixed order, so the result is the same under every thread order.
TEST_F(EmuTest, RowSumIsBitwiseIndependentOfTheThreadOrder) {
  std::vector<float> x(4 * 777);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(static_cast<float>(i)) * 1e3f;
  DeviceArray<float> d_x(x), d_out(4);
  row_sum(d_x.get(), d_out.get(), 4, 777, nullptr);
  const std::vector<float> first = d_out.download();
  for (uint64_t seed = 1; seed < 4; ++seed) {
    emu::set_schedule_seed(seed);
    row_sum(d_x.get(), d_out.get(), 4, 777, nullptr);
    EXPECT_EQ(d_out.download(), first) << "seed " << seed;
  }
}

TEST_F(EmuTest, RowSumRefusesAnEmptyMatrix) { EXPECT_THROW(row_sum(nullptr, nullptr, 0, 4, nullptr), gpt::Error); }

}  // namespace
}  // namespace gpt::cuda::test
