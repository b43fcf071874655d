// GELU (tanh approximation): forward against the formula and f32 against f64; backward against central
// finite differences in double (h = 1e-6, normwise relative tolerance 1e-6), also in place.
#include "cpu/gradcheck.h"

#include <gtest/gtest.h>

#include <cmath>

namespace gpt {
namespace {

using test::cpu_backend;
using test::max_rel_error;
using test::random_vector;
using test::view;

constexpr int64_t kN = 7, kC = 53;

TEST(CpuGelu, ForwardMatchesFormulaAndF32AgreesWithF64) {
  std::vector<double> in = random_vector(kN * kC, 1, 3.0);
  std::vector<double> out(kN * kC, NAN);
  cpu_backend().gelu_forward({view(out, {kN, kC}), view(in, {kN, kC})});
  std::vector<double> expect(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    const double x = in[i];
    expect[i] = 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
  }
  EXPECT_LT(max_rel_error(out, expect), 1e-14);

  std::vector<float> in32 = test::to_f32(in), out32(in.size(), NAN);
  cpu_backend().gelu_forward({view(out32, {kN, kC}), view(in32, {kN, kC})});
  EXPECT_LT(max_rel_error(out32, out, 1.0), 1e-5);
}

TEST(CpuGelu, BackwardMatchesFiniteDifferencesAndMayRunInPlace) {
  std::vector<double> in = random_vector(kN * kC, 2, 3.0);
  std::vector<double> r = random_vector(kN * kC, 3);
  std::vector<double> out(in.size());
  auto loss = [&] {
    cpu_backend().gelu_forward({view(out, {kN, kC}), view(in, {kN, kC})});
    return test::dot(out, r);
  };
  std::vector<double> din(in.size(), NAN);
  cpu_backend().gelu_backward({view(din, {kN, kC}), view(r, {kN, kC}), view(in, {kN, kC})});
  EXPECT_LT(test::max_normwise_error(din, test::numeric_gradient(in, loss)), 1e-6);

  std::vector<double> inplace = r;
  cpu_backend().gelu_backward({view(inplace, {kN, kC}), view(inplace, {kN, kC}), view(in, {kN, kC})});
  EXPECT_EQ(inplace, din);

  std::vector<float> in32 = test::to_f32(in), r32 = test::to_f32(r), din32(in.size(), NAN);
  cpu_backend().gelu_backward({view(din32, {kN, kC}), view(r32, {kN, kC}), view(in32, {kN, kC})});
  EXPECT_LT(max_rel_error(din32, din, 1.0), 1e-5);
}

}  // namespace
}  // namespace gpt
