// The CPU backend's vectorisable building blocks: exp_f32 within 2 ulp of the exact exponential over its
// whole range, lane_sum against a plain sum, and DropoutCursor against DropoutMask::keep (the mask rule
// element i kept iff stream.word(i) >= threshold).
#include "cpu/dropout.h"
#include "cpu/vec_math.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

namespace gpt {
namespace {

// |got - exact| in units of the spacing of floats at exact (subnormal spacing below the normal range).
double ulp_error(float got, double exact) {
  const double spacing = std::ldexp(1.0, std::max(std::ilogb(exact), -126) - 23);
  return std::abs(static_cast<double>(got) - exact) / spacing;
}

TEST(CpuVectorMath, ExpIsWithinTwoUlpEverywhere) {
  double worst = 0.0;
  float worst_x = 0.0f;
  // Every 97th float in [-103, 88.7]: about 20 million arguments, all binades and both signs.
  const uint32_t lo = std::bit_cast<uint32_t>(-103.0f), hi_neg = std::bit_cast<uint32_t>(-0.0f);
  auto check = [&](float x) {
    const double exact = std::exp(static_cast<double>(x));
    if (exact > std::numeric_limits<float>::max()) return;
    const double e = ulp_error(cpu::exp_f32(x), exact);
    if (e > worst) {
      worst = e;
      worst_x = x;
    }
  };
  for (uint32_t b = hi_neg; b <= lo; b += 97) check(std::bit_cast<float>(b));
  for (uint32_t b = 0; b <= std::bit_cast<uint32_t>(88.72f); b += 97) check(std::bit_cast<float>(b));
  EXPECT_LE(worst, 2.0) << "at x = " << worst_x;

  EXPECT_EQ(cpu::exp_f32(0.0f), 1.0f);
  EXPECT_EQ(cpu::exp_f32(-200.0f), 0.0f);
  EXPECT_EQ(cpu::exp_f32(-std::numeric_limits<float>::infinity()), 0.0f);
  EXPECT_EQ(cpu::exp_f32(89.0f), std::numeric_limits<float>::infinity());
  EXPECT_EQ(cpu::exp_f32(std::numeric_limits<float>::infinity()), std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(cpu::exp_f32(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_GT(cpu::exp_f32(-100.0f), 0.0f) << "subnormal results are kept";
  EXPECT_EQ(cpu::exp_of(1.5), std::exp(1.5));
}

TEST(CpuVectorMath, LaneSumMatchesAPlainSum) {
  std::mt19937 rng(3);
  std::normal_distribution<double> normal;
  for (int64_t n : {0, 1, 7, 8, 9, 63, 1000, 4097, 50257}) {
    std::vector<float> x(static_cast<size_t>(n));
    for (float& v : x) v = static_cast<float>(normal(rng));
    double plain = 0.0, abs_sum = 0.0;
    for (float v : x) {
      plain += v;
      abs_sum += std::abs(v);
    }
    const double lanes = cpu::lane_sum(n, [&](int64_t i) { return x[static_cast<size_t>(i)]; });
    EXPECT_NEAR(lanes, plain, 1e-15 * (abs_sum + 1.0)) << "n = " << n;
    // The documented order, bit for bit: lane i mod 8, then ((0+1)+(2+3))+((4+5)+(6+7)).
    double acc[8] = {};
    for (int64_t i = 0; i < n; ++i) acc[i % 8] += x[static_cast<size_t>(i)];
    EXPECT_EQ(lanes, ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]))) << "n = " << n;
    double a = 0.0, b = 0.0;
    cpu::lane_sum2(
        n,
        [&](int64_t i, double& ta, double& tb) {
          ta = x[static_cast<size_t>(i)];
          tb = 2.0 * x[static_cast<size_t>(i)];
        },
        a, b);
    EXPECT_EQ(a, lanes);
    EXPECT_EQ(b, 2.0 * lanes);
  }
  const float values[] = {3.0f, -1.0f, 2.5f, 7.0f, 0.5f};
  EXPECT_EQ(cpu::lane_max(values, 5), 7.0f);
  EXPECT_EQ(cpu::lane_max(values, 1), 3.0f);
}

TEST(CpuVectorMath, DropoutCursorGivesTheMaskRule) {
  DropoutSpec spec;
  spec.p = 0.3f;
  spec.stream = RngStream{99, 4, 1, 2, RngSite::MlpResidual};
  const cpu::DropoutMask mask(spec);
  const uint32_t threshold = dropout_threshold(spec.p);
  cpu::DropoutCursor in_order(mask);
  int kept = 0;
  for (uint64_t i = 3; i < 3 + 4099; ++i) {
    const bool keep = in_order.keep(i);
    ASSERT_EQ(keep, spec.stream.word(i) >= threshold) << "element " << i;
    ASSERT_EQ(keep, mask.keep(i));
    kept += keep;
  }
  EXPECT_NEAR(kept / 4099.0, 0.7, 0.03);
  cpu::DropoutCursor scattered(mask);
  for (uint64_t i : {17u, 16u, 900u, 18u, 17u, 5u}) EXPECT_EQ(scattered.keep(i), mask.keep(i)) << "element " << i;

  spec.p = 0.0f;
  const cpu::DropoutMask off(spec);
  cpu::DropoutCursor none(off);
  for (uint64_t i = 0; i < 64; ++i) EXPECT_TRUE(none.keep(i));
}

}  // namespace
}  // namespace gpt
