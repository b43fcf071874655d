// Row-wise softmax: forward against a direct formula, F32/F64 agreement, backward against central
// finite differences in double precision.
#include "cpu/gradcheck.h"

#include <gtest/gtest.h>

#include <cmath>

namespace gpt {
namespace {

using test::cpu_backend;
using test::view;

constexpr int64_t kRows = 7, kCols = 13;

template <class T>
std::vector<T> softmax(std::vector<T>& in) {
  std::vector<T> out(in.size(), T(NAN));
  cpu_backend().softmax_forward({view(out, {kRows, kCols}), view(in, {kRows, kCols})});
  return out;
}

TEST(CpuSoftmax, ForwardMatchesFormula) {
  // Scale 30 puts row maxima far from 0, so an implementation without the max shift would overflow.
  std::vector<double> in = test::random_vector(kRows * kCols, 1, 30.0);
  in[5] = 700.0;
  const std::vector<double> out = softmax(in);
  std::vector<double> want(in.size());
  for (int64_t r = 0; r < kRows; ++r) {
    double max_val = -INFINITY, sum = 0.0;
    for (int64_t j = 0; j < kCols; ++j) max_val = std::max(max_val, in[r * kCols + j]);
    for (int64_t j = 0; j < kCols; ++j) sum += std::exp(in[r * kCols + j] - max_val);
    for (int64_t j = 0; j < kCols; ++j) want[r * kCols + j] = std::exp(in[r * kCols + j] - max_val) / sum;
  }
  EXPECT_LT(test::max_rel_error(out, want, 1e-300), 1e-13);
}

TEST(CpuSoftmax, F32AgreesWithF64) {
  std::vector<double> in64 = test::random_vector(kRows * kCols, 2, 3.0);
  std::vector<float> in32 = test::to_f32(in64);
  EXPECT_LT(test::max_rel_error(softmax(in32), softmax(in64)), 1e-5);
}

// L = sum(softmax(x) * R), central differences with h = 1e-6; the rounding of the quotient is ~1e-10
// absolute, observed 3e-7 relative (floor 1e-3); the tolerance is 1e-6.
TEST(CpuSoftmax, BackwardMatchesFiniteDifferences) {
  std::vector<double> in = test::random_vector(kRows * kCols, 3);
  std::vector<double> r = test::random_vector(kRows * kCols, 4);
  std::vector<double> out = softmax(in);
  std::vector<double> din(in.size(), NAN);
  cpu_backend().softmax_backward({view(din, {kRows, kCols}), view(r, {kRows, kCols}), view(out, {kRows, kCols})});
  const std::vector<double> numeric = test::numeric_gradient(in, [&] { return test::dot(softmax(in), r); });
  EXPECT_LT(test::max_rel_error(din, numeric), 1e-6);

  // In place (din aliasing dout) gives the same values.
  std::vector<double> in_place = r;
  cpu_backend().softmax_backward(
      {view(in_place, {kRows, kCols}), view(in_place, {kRows, kCols}), view(out, {kRows, kCols})});
  EXPECT_EQ(in_place, din);
}

}  // namespace
}  // namespace gpt
