// The scalar conversions of precision/float_formats.h against the independent reference of
// format_reference.h: every code decodes to its defined value and round-trips; random floats and doubles
// (all exponents, and concentrated on each format's range), every midpoint between neighbouring codes and
// the floats/doubles on either side of it round like the nearest-value search; plus a hand-written table
// of edge cases (max, min normal, min subnormal, ties both ways, overflow, inf, NaN) per format.
//
// NaN rule: any NaN input encodes to the positive canonical NaN (all mantissa bits set: bf16/f16 0x7FFF,
// e4m3/e5m2 0x7F); so decode -> encode returns every non-NaN code unchanged (non-saturating; saturating
// maps +-inf codes to +-max) and every NaN code as the canonical NaN.
#include "precision/format_reference.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cfloat>
#include <cstring>
#include <random>

namespace gpt {
namespace {

using test::FormatSpec;
using test::RefEncoder;

// One format's implementation, through its traits, behind a common signature.
struct Impl {
  FormatSpec spec;
  uint32_t (*encode32)(float, bool);
  uint32_t (*encode64)(double, bool);
  float (*decode)(uint32_t);
};

// gtest names the format in failure messages instead of dumping the struct's bytes.
void PrintTo(const Impl& impl, std::ostream* os) { *os << impl.spec.name; }

template <class Fmt>
Impl make_impl(const FormatSpec& spec) {
  return {spec, [](float x, bool s) -> uint32_t { return Fmt::encode(x, s); },
          [](double x, bool s) -> uint32_t { return Fmt::encode(x, s); },
          [](uint32_t c) { return Fmt::decode(static_cast<typename Fmt::Storage>(c)); }};
}

std::vector<Impl> all_formats() {
  return {make_impl<Bf16Format>(test::kBf16Spec), make_impl<F16Format>(test::kF16Spec),
          make_impl<E4m3Format>(test::kE4m3Spec), make_impl<E5m2Format>(test::kE5m2Spec)};
}

std::string hex(uint32_t c) { return fmt::format("0x{:X}", c); }

class FloatFormat : public ::testing::TestWithParam<Impl> {
 protected:
  const Impl& impl() const { return GetParam(); }
  const FormatSpec& spec() const { return GetParam().spec; }
};

TEST_P(FloatFormat, EveryCodeDecodesToItsDefinedValue) {
  for (uint32_t c = 0; c < test::code_count(spec()); ++c) {
    const float got = impl().decode(c);
    const double want = test::ref_decode(spec(), c);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << hex(c);
      // bf16 widens by a shift (payload and sign kept); the others give the canonical FP32 NaN.
      const uint32_t bits = f32_bits(got);
      EXPECT_EQ(bits, spec().exp_bits == 8 ? c << 16 : 0x7FFFFFFFu) << hex(c);
    } else {
      EXPECT_EQ(static_cast<double>(got), want) << hex(c);
      EXPECT_EQ(std::signbit(got), std::signbit(want)) << hex(c);
    }
  }
}

TEST_P(FloatFormat, EveryCodeRoundTrips) {
  const RefEncoder ref(spec());
  for (uint32_t c = 0; c < test::code_count(spec()); ++c) {
    const float v = impl().decode(c);
    if (test::ref_is_nan(spec(), c)) {
      for (bool sat : {false, true}) {
        EXPECT_EQ(impl().encode32(v, sat), spec().canonical_nan) << hex(c);
        EXPECT_EQ(impl().encode64(v, sat), spec().canonical_nan) << hex(c);
      }
      continue;
    }
    EXPECT_EQ(impl().encode32(v, false), c) << hex(c);
    EXPECT_EQ(impl().encode64(static_cast<double>(v), false), c) << hex(c);
    const uint32_t saturated = std::isinf(v) ? (c & test::sign_bit(spec())) | ref.max_code() : c;
    EXPECT_EQ(impl().encode32(v, true), saturated) << hex(c);
  }
}

// Compares one input in both saturation modes; returns false on the first mismatch (to stop flooding).
template <class T>
bool agrees(const Impl& impl, const RefEncoder& ref, T x) {
  for (bool sat : {false, true}) {
    const uint32_t got = sizeof(T) == 4 ? impl.encode32(static_cast<float>(x), sat) : impl.encode64(static_cast<double>(x), sat);
    const uint32_t want = ref.encode(static_cast<double>(x), sat);
    if (got != want) {
      ADD_FAILURE() << impl.spec.name << (sizeof(T) == 4 ? " f32 " : " f64 ") << fmt::format("{:a}", static_cast<double>(x))
                    << (sat ? " saturating" : "") << ": got " << hex(got) << ", want " << hex(want);
      return false;
    }
  }
  return true;
}

TEST_P(FloatFormat, RandomFloatsMatchTheReference) {
  const RefEncoder ref(spec());
  std::mt19937 rng(1234);
  std::uniform_int_distribution<uint32_t> bits32;
  // Exponents from below the smallest subnormal to above max.
  const int bias = (1 << (spec().exp_bits - 1)) - 1;
  std::uniform_int_distribution<int> near_exp(2 - bias - spec().man_bits - 3, bias + 2);
  for (int i = 0; i < 200000; ++i) {
    if (!agrees(impl(), ref, f32_from_bits(bits32(rng)))) return;
    const float near = std::ldexp(1.0f + static_cast<float>(bits32(rng) >> 9) * 0x1p-23f, near_exp(rng));
    if (!agrees(impl(), ref, (i & 1) ? -near : near)) return;
  }
}

TEST_P(FloatFormat, RandomDoublesMatchTheReference) {
  const RefEncoder ref(spec());
  std::mt19937_64 rng(99);
  std::uniform_int_distribution<uint64_t> bits64;
  const int bias = (1 << (spec().exp_bits - 1)) - 1;
  std::uniform_int_distribution<int> near_exp(2 - bias - spec().man_bits - 3, bias + 2);
  for (int i = 0; i < 100000; ++i) {
    uint64_t b = bits64(rng);
    double wide;
    std::memcpy(&wide, &b, sizeof wide);
    if (!agrees(impl(), ref, wide)) return;
    const double near = std::ldexp(1.0 + static_cast<double>(bits64(rng) >> 12) * 0x1p-52, near_exp(rng));
    if (!agrees(impl(), ref, (i & 1) ? -near : near)) return;
  }
}

// Every tie (the midpoint of two neighbouring positive values, the virtual one past max included) and
// the nearest float and double on either side of it, with both signs.
TEST_P(FloatFormat, MidpointsAndTheirNeighboursRoundToNearestEven) {
  const RefEncoder ref(spec());
  const std::vector<double>& v = ref.values();
  for (size_t i = 0; i + 1 < v.size(); ++i) {
    const double mid = (v[i] + v[i + 1]) / 2.0;
    const float mid32 = static_cast<float>(mid);
    ASSERT_EQ(static_cast<double>(mid32), mid) << "midpoints of these formats are floats";
    for (float x : {mid32, std::nextafter(mid32, 0.0f), std::nextafter(mid32, INFINITY)})
      if (!agrees(impl(), ref, x) || !agrees(impl(), ref, -x)) return;
    for (double x : {mid, std::nextafter(mid, 0.0), std::nextafter(mid, INFINITY)})
      if (!agrees(impl(), ref, x) || !agrees(impl(), ref, -x)) return;
  }
}

TEST_P(FloatFormat, SpecialInputs) {
  const RefEncoder ref(spec());
  const uint32_t sign = test::sign_bit(spec()), max = ref.max_code();
  const uint32_t overflow = spec().has_inf ? max + 1 : spec().canonical_nan;
  for (auto encode : {+[](const Impl& m, double x, bool s) { return m.encode32(static_cast<float>(x), s); },
                      +[](const Impl& m, double x, bool s) { return m.encode64(x, s); }}) {
    EXPECT_EQ(encode(impl(), 0.0, false), 0u);
    EXPECT_EQ(encode(impl(), -0.0, false), sign);
    EXPECT_EQ(encode(impl(), INFINITY, false), overflow);
    EXPECT_EQ(encode(impl(), -INFINITY, false), sign | overflow);
    EXPECT_EQ(encode(impl(), INFINITY, true), max);
    EXPECT_EQ(encode(impl(), -INFINITY, true), sign | max);
    EXPECT_EQ(encode(impl(), NAN, false), spec().canonical_nan);
    EXPECT_EQ(encode(impl(), -NAN, true), spec().canonical_nan);
    EXPECT_EQ(encode(impl(), FLT_MAX, false), overflow);
    EXPECT_EQ(encode(impl(), -FLT_MAX, true), sign | max);
    EXPECT_EQ(encode(impl(), 0x1p-149, false), 0u);  // the smallest float subnormal
    EXPECT_EQ(encode(impl(), -0x1p-149, false), sign);
  }
}

INSTANTIATE_TEST_SUITE_P(All, FloatFormat, ::testing::ValuesIn(all_formats()),
                         [](const ::testing::TestParamInfo<Impl>& info) { return std::string(info.param.spec.name); });

// Hand-checked codes, independent of the reference's construction.
struct Case {
  double x;
  uint32_t code;           // non-saturating
  uint32_t code_saturated;
};

void expect_cases(const Impl& impl, std::initializer_list<Case> cases) {
  for (const Case& c : cases) {
    EXPECT_EQ(impl.encode64(c.x, false), c.code) << impl.spec.name << " " << c.x;
    EXPECT_EQ(impl.encode64(c.x, true), c.code_saturated) << impl.spec.name << " " << c.x << " saturating";
    const auto f = static_cast<float>(c.x);
    if (static_cast<double>(f) == c.x || std::isnan(c.x)) {
      EXPECT_EQ(impl.encode32(f, false), c.code) << impl.spec.name << " " << c.x;
      EXPECT_EQ(impl.encode32(f, true), c.code_saturated) << impl.spec.name << " " << c.x << " saturating";
    }
  }
}

TEST(FloatFormatEdges, E4m3) {
  const double above_tie = std::nextafter(464.0, INFINITY);
  expect_cases(make_impl<E4m3Format>(test::kE4m3Spec),
               {{448, 0x7E, 0x7E}, {-448, 0xFE, 0xFE},
                {464, 0x7E, 0x7E},  // max + ulp/2: the tie goes to max's even mantissa 110
                {above_tie, 0x7F, 0x7E}, {-above_tie, 0xFF, 0xFE}, {480, 0x7F, 0x7E}, {1e6, 0x7F, 0x7E},
                {0x1p-6, 0x08, 0x08},          // min normal
                {0x1p-9, 0x01, 0x01},          // min subnormal
                {7 * 0x1p-9, 0x07, 0x07},      // largest subnormal
                {7.5 * 0x1p-9, 0x08, 0x08},    // tie between the largest subnormal and min normal: even
                {0x1p-10, 0x00, 0x00}, {-0x1p-10, 0x80, 0x80},  // half the min subnormal: ties to zero
                {std::nextafter(0x1p-10, 1.0), 0x01, 0x01},
                {3 * 0x1p-10, 0x02, 0x02}, {5 * 0x1p-10, 0x02, 0x02},  // ties up and down to even
                {1.0, 0x38, 0x38}, {1.0625, 0x38, 0x38}, {1.1875, 0x3A, 0x3A}, {240, 0x77, 0x77},
                {INFINITY, 0x7F, 0x7E}, {-INFINITY, 0xFF, 0xFE}, {NAN, 0x7F, 0x7F}, {-NAN, 0x7F, 0x7F}});
  EXPECT_EQ(f32_to_e4m3(1000.0f), 0x7E);  // the scalar API saturates by default, as Transformer Engine does
  EXPECT_EQ(f32_to_e4m3(1000.0f, false), 0x7F);
  EXPECT_EQ(e4m3_to_f32(0x7E), 448.0f);
  EXPECT_EQ(e4m3_to_f32(0x01), 0x1p-9f);
  EXPECT_TRUE(std::isnan(e4m3_to_f32(0xFF)));
  EXPECT_EQ(e4m3_to_f32(0xF8), -256.0f);  // S.1111.000 is finite in E4M3FN
}

TEST(FloatFormatEdges, E5m2) {
  expect_cases(make_impl<E5m2Format>(test::kE5m2Spec),
               {{57344, 0x7B, 0x7B}, {std::nextafter(61440.0, 0.0), 0x7B, 0x7B},
                {61440, 0x7C, 0x7B},  // max + ulp/2: max's mantissa 11 is odd, so the tie overflows
                {-61440, 0xFC, 0xFB}, {0x1p-14, 0x04, 0x04}, {0x1p-16, 0x01, 0x01}, {0x1p-17, 0x00, 0x00},
                {3 * 0x1p-17, 0x02, 0x02}, {1.0, 0x3C, 0x3C}, {1.125, 0x3C, 0x3C}, {1.375, 0x3E, 0x3E},
                {INFINITY, 0x7C, 0x7B}, {-INFINITY, 0xFC, 0xFB}, {NAN, 0x7F, 0x7F}});
  EXPECT_EQ(e5m2_to_f32(0x7C), INFINITY);
  EXPECT_EQ(e5m2_to_f32(0xFB), -57344.0f);
  EXPECT_EQ(f32_to_e5m2(1e9f), 0x7B);
  EXPECT_EQ(f32_to_e5m2(1e9f, false), 0x7C);
}

TEST(FloatFormatEdges, F16) {
  expect_cases(make_impl<F16Format>(test::kF16Spec),
               {{65504, 0x7BFF, 0x7BFF}, {std::nextafter(65520.0, 0.0), 0x7BFF, 0x7BFF}, {65520, 0x7C00, 0x7BFF},
                {0x1p-24, 0x0001, 0x0001}, {0x1p-25, 0x0000, 0x0000}, {std::nextafter(0x1p-25, 1.0), 0x0001, 0x0001},
                {3 * 0x1p-25, 0x0002, 0x0002}, {0x1p-14, 0x0400, 0x0400}, {1.0, 0x3C00, 0x3C00}, {-2.0, 0xC000, 0xC000},
                {1 + 0x1p-11, 0x3C00, 0x3C00}, {1 + 3 * 0x1p-11, 0x3C02, 0x3C02},
                {INFINITY, 0x7C00, 0x7BFF}, {NAN, 0x7FFF, 0x7FFF}});
  EXPECT_EQ(f32_to_f16(1e6f), 0x7C00);  // IEEE: f16 overflows to inf
  EXPECT_EQ(f16_to_f32(0x0001), 0x1p-24f);
  EXPECT_EQ(f16_to_f32(0xFBFF), -65504.0f);
}

TEST(FloatFormatEdges, Bf16) {
  expect_cases(make_impl<Bf16Format>(test::kBf16Spec),
               {{1.0, 0x3F80, 0x3F80}, {1 + 0x1p-8, 0x3F80, 0x3F80}, {1 + 3 * 0x1p-8, 0x3F82, 0x3F82},
                {std::nextafter(1 + 0x1p-8, 2.0), 0x3F81, 0x3F81}, {0x1.FEp127, 0x7F7F, 0x7F7F},
                {0x1.FFp127, 0x7F80, 0x7F7F},  // tie between max (odd mantissa) and inf
                {FLT_MAX, 0x7F80, 0x7F7F}, {0x1p-126, 0x0080, 0x0080}, {0x1p-133, 0x0001, 0x0001},
                {0x1p-134, 0x0000, 0x0000}, {3 * 0x1p-134, 0x0002, 0x0002}, {INFINITY, 0x7F80, 0x7F7F},
                {NAN, 0x7FFF, 0x7FFF}, {-NAN, 0x7FFF, 0x7FFF}});
  EXPECT_EQ(bf16_to_f32(0x3F80), 1.0f);
  EXPECT_EQ(f32_to_bf16(3.0e38f), 0x7F62);
}

// One rounding from the double: a double just above a tie rounds up, while its conversion to float first
// lands exactly on the tie, which then rounds to even (down). The FP64 overloads must not take that detour.
TEST(FloatFormatEdges, DoublesRoundOnceNotThroughFloat) {
  const double x = 1.0625 + 0x1p-40;  // e4m3: 1.0625 is the tie between 1.0 and 1.125
  ASSERT_EQ(static_cast<float>(x), 1.0625f);
  EXPECT_EQ(f64_to_e4m3(x), 0x39);
  EXPECT_EQ(f32_to_e4m3(static_cast<float>(x)), 0x38);
  const double y = 1 + 0x1p-8 + 0x1p-40;  // bf16 tie
  ASSERT_EQ(static_cast<float>(y), 1 + 0x1p-8f);
  EXPECT_EQ(f64_to_bf16(y), 0x3F81);
  EXPECT_EQ(f32_to_bf16(static_cast<float>(y)), 0x3F80);
}

TEST(FloatFormatEdges, Limits) {
  EXPECT_EQ(float_format_max(DType::E4M3), 448.0f);
  EXPECT_EQ(float_format_max(DType::E5M2), 57344.0f);
  EXPECT_EQ(float_format_max(DType::F16), 65504.0f);
  EXPECT_EQ(float_format_max(DType::BF16), bf16_to_f32(0x7F7F));
  EXPECT_EQ(float_format_max(DType::F32), 0.0f);
  EXPECT_EQ(e5m2_to_f32(E5m2Format::kMaxCode), E5m2Format::kMax);
  EXPECT_EQ(e4m3_to_f32(E4m3Format::kMaxCode), E4m3Format::kMax);
  EXPECT_EQ(f16_to_f32(F16Format::kMaxCode), F16Format::kMax);
  EXPECT_EQ(bf16_to_f32(Bf16Format::kMaxCode), Bf16Format::kMax);
  EXPECT_EQ(e4m3_to_f32(0x08), E4m3Format::kMinNormal);
  EXPECT_EQ(e5m2_to_f32(0x01), E5m2Format::kMinSubnormal);
  EXPECT_EQ(f16_to_f32(0x0001), F16Format::kMinSubnormal);
  EXPECT_EQ(bf16_to_f32(0x0001), Bf16Format::kMinSubnormal);
}

}  // namespace
}  // namespace gpt
