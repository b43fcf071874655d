// cuda/kernels/reduce.cu on the emulator: sum_of_squares and bias_backward give the same bits when called
// twice and under every thread order (emu::set_schedule_seed), and the sum of squares, accumulated in
// double, is the double-precision sum to 1e-6 relative (the global gradient norm's requirement).
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "cuda/kernels/kernel_test_util.h"
#include "kernels/reduce.h"
#include "precision/float_formats.h"

namespace gpt::cuda::test {
namespace {

std::vector<float> random_values(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> x(n);
  for (float& v : x) v = dist(rng);
  return x;
}

// 40009 elements: five pass-1 blocks and a tail that is not a whole pack.
TEST_F(EmuTest, SumOfSquaresIsBitwiseReproducibleAndMatchesADoubleSum) {
  const KernelContext ctx;
  const std::vector<float> x = random_values(40009, 1);
  DeviceTensor in({40009}, DType::F32), out({1}, DType::F32);
  in.upload(x.data());
  sum_of_squares({out.tensor(), in.tensor()}, ctx.get());
  const std::vector<unsigned char> first = out.download();
  sum_of_squares({out.tensor(), in.tensor()}, ctx.get());
  EXPECT_EQ(out.download(), first) << "the same call twice";
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    emu::set_schedule_seed(seed);
    sum_of_squares({out.tensor(), in.tensor()}, ctx.get());
    EXPECT_EQ(out.download(), first) << "schedule seed " << seed;
  }
  double want = 0.0;
  for (float v : x) want += static_cast<double>(v) * v;
  float got;
  std::memcpy(&got, first.data(), sizeof got);
  EXPECT_NEAR(got, want, 1e-6 * want);
}

TEST_F(EmuTest, SumOfSquaresOfBf16IsBitwiseReproducible) {
  const KernelContext ctx;
  const std::vector<float> x = random_values(9001, 2);
  std::vector<uint16_t> codes(x.size());
  for (size_t i = 0; i < x.size(); ++i) codes[i] = f32_to_bf16(x[i]);
  DeviceTensor in({9001}, DType::BF16), out({1}, DType::F64);
  in.upload(codes.data());
  sum_of_squares({out.tensor(), in.tensor()}, ctx.get());
  const std::vector<unsigned char> first = out.download();
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    emu::set_schedule_seed(seed);
    sum_of_squares({out.tensor(), in.tensor()}, ctx.get());
    EXPECT_EQ(out.download(), first) << "schedule seed " << seed;
  }
}

// 1000 rows: eight row splits; 200 columns: a partial column tile; dbias starts from the same values each time.
TEST_F(EmuTest, BiasBackwardIsBitwiseReproducible) {
  const KernelContext ctx;
  for (const auto& [rows, cols, dtype] : {std::tuple{1000, 200, DType::F32}, std::tuple{1000, 24, DType::BF16}}) {
    const std::vector<float> x = random_values(static_cast<size_t>(rows) * cols, 3);
    const std::vector<float> start = random_values(static_cast<size_t>(cols), 4);
    DeviceTensor dout({rows, cols}, dtype), dbias({cols}, DType::F32);
    if (dtype == DType::BF16) {
      std::vector<uint16_t> codes(x.size());
      for (size_t i = 0; i < x.size(); ++i) codes[i] = f32_to_bf16(x[i]);
      dout.upload(codes.data());
    } else {
      dout.upload(x.data());
    }
    dbias.upload(start.data());
    bias_backward({dbias.tensor(), dout.tensor()}, ctx.get());
    const std::vector<unsigned char> first = dbias.download();
    for (uint64_t seed = 0; seed <= 3; ++seed) {
      emu::set_schedule_seed(seed);
      dbias.upload(start.data());
      bias_backward({dbias.tensor(), dout.tensor()}, ctx.get());
      EXPECT_EQ(dbias.download(), first) << rows << "x" << cols << " schedule seed " << seed;
    }
  }
}

TEST_F(EmuTest, ReductionsRefuseWhatTheyCannotDo) {
  const KernelContext ctx;
  DeviceTensor in({4}, DType::F32), out16({1}, DType::BF16), dbias({3}, DType::F32), dbias64({4}, DType::F64);
  EXPECT_THROW(sum_of_squares({out16.tensor(), in.tensor()}, ctx.get()), gpt::Error);  // out must be f32/f64
  EXPECT_THROW(bias_backward({dbias.tensor(), in.tensor()}, ctx.get()), gpt::Error);   // 3 != 4 columns
  EXPECT_THROW(bias_backward({dbias64.tensor(), in.tensor()}, ctx.get()), gpt::Error);  // f64 refused
}

}  // namespace
}  // namespace gpt::cuda::test
