// Residual add with dropout p = 0.3: the mask is a pure function of the stream, so central finite
// differences in double are valid (h = 1e-6, normwise relative tolerance 1e-6). Also: the mask keeps
// about 1-p of the elements, matches DropoutMask, runs in place, and is a copy without dropout.
#include "cpu/dropout.h"
#include "cpu/gradcheck.h"

#include <gtest/gtest.h>

#include <cmath>

namespace gpt {
namespace {

using test::cpu_backend;
using test::max_rel_error;
using test::random_vector;
using test::view;

constexpr int64_t kB = 3, kT = 7, kC = 41;
constexpr int64_t kCount = kB * kT * kC;

DropoutSpec dropout(float p) { return {p, RngStream{1234, 5, 1, 2, RngSite::AttentionResidual}}; }

TEST(CpuResidual, ForwardDropsThroughTheStreamMask) {
  std::vector<double> res = random_vector(kCount, 1), x = random_vector(kCount, 2), out(kCount, NAN);
  const DropoutSpec spec = dropout(0.3f);
  cpu_backend().residual_forward({view(out, {kB, kT, kC}), view(res, {kB, kT, kC}), view(x, {kB, kT, kC}), spec});
  const cpu::DropoutMask mask(spec);
  int64_t kept = 0;
  for (int64_t i = 0; i < kCount; ++i) {
    const bool keep = spec.stream.word(static_cast<uint64_t>(i)) >= dropout_threshold(0.3f);
    ASSERT_EQ(keep, mask.keep(static_cast<uint64_t>(i)));
    kept += keep;
    if (keep) {
      ASSERT_NEAR(out[i], res[i] + x[i] * mask.scale(), 1e-15 * (std::abs(res[i]) + std::abs(x[i] * mask.scale())));
    } else {
      ASSERT_EQ(out[i], res[i]);
    }
  }
  EXPECT_NEAR(static_cast<double>(kept) / kCount, 0.7, 0.04);

  std::vector<float> res32 = test::to_f32(res), x32 = test::to_f32(x), out32(kCount, NAN);
  cpu_backend().residual_forward({view(out32, {kB, kT, kC}), view(res32, {kB, kT, kC}), view(x32, {kB, kT, kC}), spec});
  EXPECT_LT(max_rel_error(out32, out, 1.0), 1e-5);

  std::vector<double> plain(kCount, NAN);
  cpu_backend().residual_forward({view(plain, {kCount}), view(res, {kCount}), view(x, {kCount}), DropoutSpec{}});
  for (int64_t i = 0; i < kCount; ++i) ASSERT_EQ(plain[i], res[i] + x[i]);
}

TEST(CpuResidual, BackwardWithDropoutMatchesFiniteDifferences) {
  std::vector<double> res = random_vector(kCount, 3), x = random_vector(kCount, 4), r = random_vector(kCount, 5);
  const DropoutSpec spec = dropout(0.3f);
  std::vector<double> out(kCount);
  auto loss = [&] {
    cpu_backend().residual_forward({view(out, {kB, kT, kC}), view(res, {kB, kT, kC}), view(x, {kB, kT, kC}), spec});
    return test::dot(out, r);
  };
  std::vector<double> dx(kCount, NAN);
  cpu_backend().residual_backward({view(dx, {kB, kT, kC}), view(r, {kB, kT, kC}), spec});
  EXPECT_LT(test::max_normwise_error(dx, test::numeric_gradient(x, loss)), 1e-6);
  // The residual input's gradient is dout itself.
  EXPECT_LT(test::max_normwise_error(r, test::numeric_gradient(res, loss)), 1e-6);

  std::vector<double> inplace = r;
  cpu_backend().residual_backward({view(inplace, {kCount}), view(inplace, {kCount}), spec});
  EXPECT_EQ(inplace, dx);
}

TEST(CpuResidual, BackwardWithoutDropoutCopies) {
  std::vector<double> dout = random_vector(kCount, 6), dx(kCount, NAN);
  cpu_backend().residual_backward({view(dx, {kCount}), view(dout, {kCount}), DropoutSpec{}});
  EXPECT_EQ(dx, dout);
  cpu_backend().residual_backward({view(dout, {kCount}), view(dout, {kCount}), DropoutSpec{}});
  EXPECT_EQ(dx, dout);
}

}  // namespace
}  // namespace gpt
