// The emulated number formats' own properties: __hfma rounds once (against an exact quad-precision
// reference, with products placed on midpoints where rounding through float would go wrong), the pair
// types and their intrinsics, the operators, the FP8 classes, and the fast-math functions within the
// tolerances fast_math.h documents. The conversions against the toolkit are in test_formats_toolkit.cpp.
#include "common/cuda_api.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <type_traits>
#include <vector>

// The toolkit's sizes and alignments (static_asserted for the toolkit in toolkit_reference.cpp): kernels
// move these types through shared memory and reinterpret pairs as 32-bit words.
static_assert(sizeof(__half) == 2 && alignof(__half) == 2 && sizeof(__half2) == 4 && alignof(__half2) == 4);
static_assert(sizeof(__nv_bfloat16) == 2 && alignof(__nv_bfloat16) == 2);
static_assert(sizeof(__nv_bfloat162) == 4 && alignof(__nv_bfloat162) == 4);
static_assert(sizeof(__half2_raw) == 4 && alignof(__half2_raw) == 4 && alignof(__nv_bfloat162_raw) == 4);
static_assert(sizeof(__nv_fp8_e4m3) == 1 && sizeof(__nv_fp8_e5m2) == 1);
static_assert(std::is_trivially_copyable_v<__nv_bfloat16> && std::is_trivially_copyable_v<__half2> &&
              std::is_trivially_copyable_v<__nv_fp8_e4m3>);

namespace {

using Quad = __float128;

// An exact reference for rounding to a 16-bit format: every non-negative finite value of the format,
// sorted; the nearest one to |q| wins, ties go to the even code, past max + ulp/2 to infinity.
template <class Format>
uint16_t reference_round(Quad q) {
  static const std::vector<double> values = [] {
    std::vector<double> v;
    for (uint32_t c = 0; c <= Format::kMaxCode; ++c) v.push_back(Format::decode(static_cast<uint16_t>(c)));
    return v;
  }();
  const bool negative = q < 0;
  const Quad a = negative ? -q : q;
  const uint16_t sign = negative ? 0x8000 : 0;
  const Quad max = values.back(), ulp_max = values.back() - values[values.size() - 2];
  if (a >= max + ulp_max / 2) return static_cast<uint16_t>(sign | (Format::kMaxCode + 1));
  const auto it = std::lower_bound(values.begin(), values.end(), static_cast<double>(a),
                                   [](double v, double x) { return v < x; });
  size_t hi = static_cast<size_t>(it - values.begin());
  // lower_bound compared doubles; step back while the candidate above is not >= the exact value.
  while (hi < values.size() && Quad(values[hi]) < a) ++hi;
  while (hi > 0 && Quad(values[hi - 1]) >= a) --hi;
  if (hi == 0) return sign;
  const size_t lo = hi - 1;
  const Quad dlo = a - Quad(values[lo]), dhi = Quad(values[hi]) - a;
  const size_t pick = dlo < dhi ? lo : dhi < dlo ? hi : (lo % 2 == 0 ? lo : hi);
  return static_cast<uint16_t>(sign | pick);
}

// Codes with at most `bits` significant bits and an exponent within `span` of 1, random signs.
// The biased exponent stays within the format's normal range (bias is also the largest exponent / 2).
uint16_t short_code(std::mt19937& rng, int man_bits, int bits, int center, int span, int bias) {
  const uint32_t man = (rng() & ((1u << (bits - 1)) - 1)) << (man_bits - (bits - 1));
  const int e = std::clamp(center + static_cast<int>(rng() % (2 * span + 1)) - span, 1, 2 * bias);
  return static_cast<uint16_t>(((rng() & 1) << 15) | (static_cast<uint32_t>(e) << man_bits) | man);
}

template <class Format, class T>
void check_fma_rounds_once(int man_bits, int bias, int short_bits) {
  std::mt19937 rng(7);
  int midpoints = 0;
  for (int i = 0; i < 20000; ++i) {
    // Short significands make the exact product land on a midpoint of the format now and then; a tiny
    // c then decides the rounding, which a detour through float would lose.
    const int exp_mask = 2 * bias + 1;
    const uint16_t a = short_code(rng, man_bits, short_bits, bias, 6, bias);
    const uint16_t b = short_code(rng, man_bits, short_bits, bias, 6, bias);
    const int pe = ((a >> man_bits) & exp_mask) + ((b >> man_bits) & exp_mask) - 2 * bias;
    const uint16_t c = i % 2 ? short_code(rng, man_bits, 8, bias + pe - 26, 2, bias)
                             : short_code(rng, man_bits, 8, bias, 8, bias);
    const Quad exact = Quad(Format::decode(a)) * Quad(Format::decode(b)) + Quad(Format::decode(c));
    if (exact == 0) continue;
    const uint16_t want = reference_round<Format>(exact);
    const float via_float = std::fma(Format::decode(a), Format::decode(b), Format::decode(c));
    if (Format::encode(via_float) != want) ++midpoints;
    const T r = __hfma(T::bits(a), T::bits(b), T::bits(c));
    ASSERT_EQ(r.code(), want) << std::hex << a << " " << b << " " << c;
  }
  // The cases above must include some where rounding through float double-rounds, or the test is idle.
  EXPECT_GT(midpoints, 10);
}

TEST(Formats, HfmaRoundsOnceBf16) { check_fma_rounds_once<gpt::Bf16Format, __nv_bfloat16>(7, 127, 5); }
TEST(Formats, HfmaRoundsOnceF16) { check_fma_rounds_once<gpt::F16Format, __half>(10, 15, 6); }

TEST(Formats, HfmaDoubleRoundingCaseByHand) {
  // 35/32 * 11/8 = 385/256 is the midpoint between the BF16 values 1.5 and 1.5078125; c = +-2^-40 decides.
  const __nv_bfloat16 a(35.0f / 32), b(11.0f / 8);
  EXPECT_EQ(float(__hfma(a, b, __nv_bfloat16(0x1p-40f))), 1.5078125f);
  EXPECT_EQ(float(__hfma(a, b, __nv_bfloat16(-0x1p-40f))), 1.5f);
  // Through float the tail is lost and the tie goes to the even 1.5.
  EXPECT_EQ(float(__float2bfloat16(std::fma(35.0f / 32, 11.0f / 8, 0x1p-40f))), 1.5f);
}

TEST(Formats, NanInfAndSignedZeroThroughArithmetic) {
  const __nv_bfloat16 inf = __ushort_as_bfloat16(0x7F80), one(1.0f);
  EXPECT_EQ(__bfloat16_as_ushort(__hadd(inf, -inf)), 0x7FFF);
  EXPECT_EQ(__bfloat16_as_ushort(__hfma(inf, __nv_bfloat16(0.0f), one)), 0x7FFF);
  EXPECT_EQ(__half_as_ushort(__hmul(__half(-0.0f), __half(3.0f))), 0x8000);
  EXPECT_EQ(__half_as_ushort(__hadd(__half(-0.0f), __half(-0.0f))), 0x8000);
  EXPECT_EQ(__half_as_ushort(__hadd(__half(65504.0f), __half(32.0f))), 0x7C00);  // overflow: +inf
  EXPECT_EQ(__half_as_ushort(__habs(__half(-2.0f))), __half_as_ushort(__half(2.0f)));
  EXPECT_EQ(__half_as_ushort(__hneg(__half(2.0f))), __half_as_ushort(__half(-2.0f)));
}

TEST(Formats, PairsAndTheirIntrinsics) {
  struct F2 {
    float x, y;
  };
  const __nv_bfloat162 p = __float22bfloat162_rn(F2{1.00390625f, -3.0f});  // 1 + 2^-8 ties to 1
  EXPECT_EQ(__low2float(p), 1.0f);
  const F2 back = __bfloat1622float2<F2>(p);  // float2 comes with emu/runtime.h; any {x, y} aggregate works
  EXPECT_EQ(back.x, 1.0f);
  EXPECT_EQ(back.y, -3.0f);
  EXPECT_EQ(__half22float2<F2>(__floats2half2_rn(0.5f, 0.25f)).y, 0.25f);
  EXPECT_EQ(__high2float(p), -3.0f);
  const __half2 h = __floats2half2_rn(0.1f, 2.0f);
  EXPECT_EQ(__half_as_ushort(__low2half(h)), __half_as_ushort(__float2half(0.1f)));
  const __half2 s = __hfma2(h, __float2half2_rn(2.0f), __halves2half2(__half(1.0f), __half(1.0f)));
  EXPECT_EQ(__high2float(s), 5.0f);
  EXPECT_EQ(__half_as_ushort(s.x), __half_as_ushort(__hfma(h.x, __half(2.0f), __half(1.0f))));
  const __nv_bfloat162_raw raw = __nv_bfloat162(__nv_bfloat16(1.0f), __nv_bfloat16(2.0f));
  EXPECT_EQ(raw.x, 0x3F80);
  EXPECT_EQ(raw.y, 0x4000);
  EXPECT_EQ(__nv_cvt_float2_to_fp8x2(F2{1.0f, 448.0f}, __NV_SATFINITE, __NV_E4M3), 0x7E38);
  const __half2_raw two = __nv_cvt_fp8x2_to_halfraw2(0x7E38, __NV_E4M3);
  EXPECT_EQ(two.x, __half_as_ushort(__half(1.0f)));
  EXPECT_EQ(two.y, __half_as_ushort(__half(448.0f)));
}

TEST(Formats, OperatorsRoundLikeTheIntrinsics) {
  std::mt19937 rng(3);
  for (int i = 0; i < 2000; ++i) {
    const auto a = __ushort_as_bfloat16(static_cast<uint16_t>(rng())), b = __ushort_as_bfloat16(static_cast<uint16_t>(rng()));
    EXPECT_EQ(__bfloat16_as_ushort(a + b), __bfloat16_as_ushort(__hadd(a, b)));
    EXPECT_EQ(__bfloat16_as_ushort(a * b), __bfloat16_as_ushort(__hmul(a, b)));
    EXPECT_EQ(a < b, float(a) < float(b));
    EXPECT_EQ(a == b, float(a) == float(b));
  }
  __half x(1.5f);
  x += __half(0.25f);
  x *= __half(2.0f);
  EXPECT_EQ(float(x), 3.5f);
  EXPECT_EQ(float(__half(3)), 3.0f);
}

TEST(Formats, Fp8ClassesSaturateAndConvertExplicitly) {
  EXPECT_EQ(__nv_fp8_e4m3(1000.0f).__x, 0x7E);  // saturates to 448
  EXPECT_EQ(__nv_fp8_e5m2(-1e6f).__x, 0xFB);    // -57344
  EXPECT_EQ(__nv_cvt_float_to_fp8(1000.0f, __NV_NOSAT, __NV_E4M3), 0x7F);
  EXPECT_EQ(__nv_cvt_float_to_fp8(-1e6f, __NV_NOSAT, __NV_E5M2), 0xFC);  // -inf
  EXPECT_EQ(static_cast<float>(__nv_fp8_e4m3(0.3f)), 0.3125f);
  EXPECT_EQ(float(static_cast<__half>(__nv_fp8_e5m2(3.0f))), 3.0f);
  EXPECT_EQ(float(static_cast<__nv_bfloat16>(__nv_fp8_e4m3(__nv_bfloat16(-2.5f)))), -2.5f);
  EXPECT_TRUE(std::isnan(static_cast<float>(__nv_fp8_e4m3(std::nanf("")))));
}

// The fast-math functions against double precision, each within the tolerance fast_math.h's table says
// kernel tests must allow (measured in float ulps of the correctly rounded result).
double ulps(float got, double exact) {
  const float r = static_cast<float>(exact);
  const double ulp = std::nextafter(std::fabs(r), INFINITY) - std::fabs(r);
  return std::fabs(static_cast<double>(got) - exact) / ulp;
}

TEST(Formats, FastMathWithinTheDocumentedTolerance) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-20.0f, 20.0f), pos(1e-3f, 1e3f);
  for (int i = 0; i < 5000; ++i) {
    const float x = u(rng), y = pos(rng);
    EXPECT_LE(ulps(__expf(x), std::exp(double(x))), 3 + std::floor(std::fabs(1.173 * x)));
    EXPECT_LE(ulps(exp2f(x), std::exp2(double(x))), 3);
    EXPECT_LE(ulps(tanhf(x), std::tanh(double(x))), 3);
    EXPECT_LE(ulps(erff(x), std::erf(double(x))), 3);
    EXPECT_LE(ulps(rsqrtf(y), 1.0 / std::sqrt(double(y))), 3);
    EXPECT_LE(ulps(__fdividef(x, y), double(x) / double(y)), 3);
    if (y >= 0.5f && y <= 2.0f)
      EXPECT_LE(std::fabs(__logf(y) - std::log(double(y))), 0x1p-21);
    else
      EXPECT_LE(ulps(__logf(y), std::log(double(y))), 4);
  }
}

}  // namespace
