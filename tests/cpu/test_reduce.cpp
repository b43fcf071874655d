// sum_of_squares: against a plain double sum, f32 against f64, its gradient 2x by central finite
// differences in double (h = 1e-6, normwise relative tolerance 1e-6), and repeatability.
#include "cpu/gradcheck.h"

#include <gtest/gtest.h>

#include <cmath>

namespace gpt {
namespace {

using test::cpu_backend;
using test::max_rel_error;
using test::random_vector;
using test::view;

constexpr int64_t kCount = 100003;  // not a multiple of any thread count in use

TEST(CpuSumOfSquares, MatchesPlainSumInF64AndF32) {
  std::vector<double> in = random_vector(kCount, 1);
  double expect = 0.0;
  for (double x : in) expect += x * x;

  std::vector<double> out64(1, NAN);
  cpu_backend().sum_of_squares({view(out64, {1}), view(in, {kCount})});
  EXPECT_NEAR(out64[0], expect, 1e-12 * expect);

  std::vector<float> in32 = test::to_f32(in), out32(1, NAN);
  cpu_backend().sum_of_squares({view(out32, {1}), view(in32, {kCount})});
  EXPECT_NEAR(out32[0], expect, 1e-5 * expect);

  std::vector<float> again(1, NAN);
  cpu_backend().sum_of_squares({view(again, {1}), view(in32, {kCount})});
  EXPECT_EQ(again[0], out32[0]);
}

TEST(CpuSumOfSquares, GradientIsTwiceTheInput) {
  std::vector<double> in = random_vector(257, 2);
  std::vector<double> out(1);
  auto loss = [&] {
    cpu_backend().sum_of_squares({view(out, {1}), view(in, {257})});
    return out[0];
  };
  std::vector<double> expect(in.size());
  for (size_t i = 0; i < in.size(); ++i) expect[i] = 2.0 * in[i];
  EXPECT_LT(test::max_normwise_error(expect, test::numeric_gradient(in, loss)), 1e-6);
}

}  // namespace
}  // namespace gpt
