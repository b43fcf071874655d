// The cast, amax and quantize_roundtrip ops of the CPU backend against the scalar conversions, element by
// element and bit for bit, on random tensors whose size is no multiple of 32 (and large enough to run in
// parallel), for every narrow format, both input precisions and both saturation modes; plus hand-made
// inputs for the underflow and saturation counts, the running amax, and the argument checks.
#include "cpu/gradcheck.h"
#include "precision/float_formats.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace gpt {
namespace {

using test::cpu_backend;
using test::view;

constexpr int64_t kCount = 70001;

// Random values spread over many binades, so every format sees underflow, subnormals and overflow once
// scaled; a few specials are planted.
template <class T>
std::vector<T> spread_values(int64_t n, uint32_t seed) {
  std::vector<double> base = test::random_vector(static_cast<size_t>(n), seed);
  std::vector<T> out(base.size());
  std::mt19937 rng(seed + 1);
  std::uniform_int_distribution<int> exp(-30, 20);
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<T>(std::ldexp(base[i], exp(rng)));
  out[0] = 0;
  out[1] = -T(0);
  out[2] = std::numeric_limits<T>::infinity();
  out[3] = -std::numeric_limits<T>::infinity();
  out[4] = std::numeric_limits<T>::quiet_NaN();
  out[5] = static_cast<T>(1e-41);  // below half of every format's smallest subnormal
  return out;
}

template <class Fmt>
DType dtype_of() {
  if constexpr (std::is_same_v<Fmt, Bf16Format>) return DType::BF16;
  if constexpr (std::is_same_v<Fmt, F16Format>) return DType::F16;
  if constexpr (std::is_same_v<Fmt, E4m3Format>) return DType::E4M3;
  return DType::E5M2;
}

// The counts the op should report, from the scalar functions.
template <class Fmt, class T>
std::pair<int, int> expected_counts(const std::vector<T>& in, T scale) {
  int under = 0, over = 0;
  for (T x : in) {
    const T v = x * scale;
    const auto code = Fmt::encode(v, false);
    const auto mag = code & ~Fmt::kSignMask;
    if (!std::isnan(v) && mag == Fmt::kMaxCode + 1) ++over;
    else if (mag == 0 && x != 0) ++under;
  }
  return {under, over};
}

template <class Fmt, class T>
void check_cast_matches_scalar(float scale, bool saturate) {
  using Storage = typename Fmt::Storage;
  std::vector<T> in = spread_values<T>(kCount, 7);
  std::vector<Storage> codes(kCount, 0xAB);
  std::vector<float> amax{0.0f};
  std::vector<int32_t> counts{5, 6};  // running totals: the op adds
  CastArgs a;
  a.out = Tensor(codes.data(), {kCount}, dtype_of<Fmt>());
  a.in = Tensor(in.data(), {kCount}, std::is_same_v<T, float> ? DType::F32 : DType::F64);
  a.scale = scale;
  a.saturate = saturate;
  a.amax = view(amax, {1});
  a.counts = view(counts, {2});
  cpu_backend().cast(a);
  for (int64_t i = 0; i < kCount; ++i) {
    // Saturation applies to FP8 only; bf16 and f16 overflow to inf whatever the flag.
    const Storage want = Fmt::encode(in[i] * static_cast<T>(scale), saturate && sizeof(Storage) == 1);
    ASSERT_EQ(codes[i], want) << "element " << i << " = " << in[i];
  }
  EXPECT_TRUE(std::isnan(amax[0])) << "the input holds a NaN";
  const auto [under, over] = expected_counts<Fmt>(in, static_cast<T>(scale));
  EXPECT_GT(under, 0);
  EXPECT_GT(over, 0);
  EXPECT_EQ(counts[0], 5 + under);
  EXPECT_EQ(counts[1], 6 + over);

  // Dequantise back: decode(code) * (1/scale), the reciprocal taken in the output precision.
  std::vector<T> back(kCount, T(-1));
  cpu_backend().cast({Tensor(back.data(), {kCount}, a.in.dtype), a.out, scale, true});
  const T inv = T(1) / static_cast<T>(scale);
  for (int64_t i = 0; i < kCount; ++i) {
    const T want = static_cast<T>(Fmt::decode(codes[i])) * inv;
    if (std::isnan(want)) ASSERT_TRUE(std::isnan(back[i])) << i;
    else ASSERT_EQ(back[i], want) << "element " << i;
  }

  // The fake quantisation is the same round trip without the narrow storage; in place here.
  std::vector<T> fq = in;
  std::vector<int32_t> fq_counts{0, 0};
  QuantizeRoundtripArgs q;
  q.out = Tensor(fq.data(), {kCount}, a.in.dtype);
  q.in = q.out;
  q.format = dtype_of<Fmt>();
  q.scale = scale;
  q.saturate = saturate;
  q.counts = view(fq_counts, {2});
  cpu_backend().quantize_roundtrip(q);
  for (int64_t i = 0; i < kCount; ++i) {
    if (std::isnan(back[i])) ASSERT_TRUE(std::isnan(fq[i])) << i;
    else ASSERT_EQ(fq[i], back[i]) << "element " << i;
  }
  EXPECT_EQ(fq_counts[0], under);
  EXPECT_EQ(fq_counts[1], over);

  // Without dequantisation the stored values themselves come back.
  std::vector<T> stored(kCount);
  q.out = Tensor(stored.data(), {kCount}, a.in.dtype);
  q.in = Tensor(in.data(), {kCount}, a.in.dtype);
  q.dequantize = false;
  q.counts = Tensor();
  cpu_backend().quantize_roundtrip(q);
  for (int64_t i = 0; i < kCount; ++i) {
    const T want = static_cast<T>(Fmt::decode(codes[i]));
    if (std::isnan(want)) ASSERT_TRUE(std::isnan(stored[i])) << i;
    else ASSERT_EQ(stored[i], want) << "element " << i;
  }
}

template <class Fmt>
void check_format() {
  for (bool saturate : {true, false}) {
    SCOPED_TRACE(saturate ? "saturating" : "not saturating");
    check_cast_matches_scalar<Fmt, float>(1.0f, saturate);
    check_cast_matches_scalar<Fmt, float>(3.7f, saturate);
    check_cast_matches_scalar<Fmt, double>(0.3f, saturate);
  }
}

TEST(CpuCast, E4m3MatchesScalarConversions) { check_format<E4m3Format>(); }
TEST(CpuCast, E5m2MatchesScalarConversions) { check_format<E5m2Format>(); }
TEST(CpuCast, F16MatchesScalarConversions) { check_format<F16Format>(); }
TEST(CpuCast, Bf16MatchesScalarConversions) { check_format<Bf16Format>(); }

TEST(CpuCast, CountsUnderflowAndSaturation) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  //                  sat     sat    under  neither under(tie) neither  sat  neither neither(tie) sat   neither
  std::vector<float> in{1000, -1000, 1e-4f, 0.0f, 0x1p-10f, nan, inf, 448, 464, 465, 0x1p-9f};
  const auto n = static_cast<int64_t>(in.size());
  std::vector<uint8_t> codes(in.size());
  std::vector<int32_t> counts{0, 0};
  std::vector<float> amax{0.0f};
  CastArgs a{Tensor(codes.data(), {n}, DType::E4M3), view(in, {n}), 1.0f, true, view(amax, {1}), view(counts, {2})};
  cpu_backend().cast(a);
  EXPECT_EQ(counts[0], 2);
  EXPECT_EQ(counts[1], 4);
  EXPECT_EQ(codes, (std::vector<uint8_t>{0x7E, 0xFE, 0x00, 0x00, 0x00, 0x7F, 0x7E, 0x7E, 0x7E, 0x7E, 0x01}));
  EXPECT_TRUE(std::isnan(amax[0])) << "a NaN input makes the amax NaN";

  a.saturate = false;
  cpu_backend().cast(a);
  EXPECT_EQ(counts[0], 4);
  EXPECT_EQ(counts[1], 8);
  EXPECT_EQ(codes, (std::vector<uint8_t>{0x7F, 0xFF, 0x00, 0x00, 0x00, 0x7F, 0x7F, 0x7E, 0x7E, 0x7F, 0x01}));

  // The scale moves values out of range: x * 2^-20 underflows everything but the zero, the NaN and the
  // infinity (still an overflow).
  counts = {0, 0};
  a.scale = 0x1p-20f;
  cpu_backend().cast(a);
  EXPECT_EQ(counts[0], 8);
  EXPECT_EQ(counts[1], 1);
}

TEST(CpuCast, Bf16AndF16OverflowToInfinityEvenWhenSaturating) {
  std::vector<float> in{1e6f, -3.0e38f};
  std::vector<uint16_t> h(2), b(2);
  std::vector<int32_t> counts{0, 0};
  cpu_backend().cast({Tensor(h.data(), {2}, DType::F16), view(in, {2}), 1.0f, true, Tensor(), view(counts, {2})});
  EXPECT_EQ(h, (std::vector<uint16_t>{0x7C00, 0xFC00}));
  EXPECT_EQ(counts[1], 2);
  cpu_backend().cast({Tensor(b.data(), {2}, DType::BF16), view(in, {2}), 4.0f, true});
  EXPECT_EQ(b, (std::vector<uint16_t>{0x4A74, 0xFF80}));
}

TEST(CpuAmax, MaxAbsRunningAndNonFinite) {
  std::vector<float> x = test::to_f32(test::random_vector(kCount, 3));
  x[1234] = -7.5f;
  std::vector<float> out{-1.0f};
  cpu_backend().amax({view(out, {1}), view(x, {kCount})});
  EXPECT_EQ(out[0], 7.5f);

  std::vector<float> small{0.5f, -2.0f};
  cpu_backend().amax({view(out, {1}), view(small, {2}), true});
  EXPECT_EQ(out[0], 7.5f) << "accumulate keeps the larger running value";
  cpu_backend().amax({view(out, {1}), view(small, {2}), false});
  EXPECT_EQ(out[0], 2.0f);

  small[0] = -std::numeric_limits<float>::infinity();
  cpu_backend().amax({view(out, {1}), view(small, {2})});
  EXPECT_EQ(out[0], std::numeric_limits<float>::infinity());
  small[0] = std::numeric_limits<float>::quiet_NaN();
  cpu_backend().amax({view(out, {1}), view(small, {2})});
  EXPECT_TRUE(std::isnan(out[0]));
  small[0] = 1.0f;
  cpu_backend().amax({view(out, {1}), view(small, {2}), true});
  EXPECT_TRUE(std::isnan(out[0])) << "a NaN running amax stays NaN until reset";

  std::vector<double> wide{3.0, -4.0};
  std::vector<double> out64{0.0};
  cpu_backend().amax({view(out64, {1}), view(wide, {2})});
  EXPECT_EQ(out64[0], 4.0);

  // Narrow inputs are decoded: e4m3 0xFE is -448.
  std::vector<uint8_t> codes{0x01, 0xFE, 0x38};
  cpu_backend().amax({view(out, {1}), Tensor(codes.data(), {3}, DType::E4M3)});
  EXPECT_EQ(out[0], 448.0f);
}

TEST(CpuCast, RecordsTheRunningAmaxOfTheUnscaledInput) {
  std::vector<float> x = test::to_f32(test::random_vector(kCount, 11));
  x[777] = -9.25f;
  std::vector<uint8_t> codes(kCount);
  std::vector<float> amax{1.0f};
  CastArgs a{Tensor(codes.data(), {kCount}, DType::E4M3), view(x, {kCount}), 16.0f, true, view(amax, {1}), Tensor()};
  cpu_backend().cast(a);
  EXPECT_EQ(amax[0], 9.25f);
  amax[0] = 20.0f;
  cpu_backend().cast(a);
  EXPECT_EQ(amax[0], 20.0f) << "the amax output is a running maximum";
  std::vector<float> fq(kCount);
  cpu_backend().quantize_roundtrip(
      {view(fq, {kCount}), view(x, {kCount}), DType::E5M2, 2.0f, true, true, view(amax, {1}), Tensor()});
  EXPECT_EQ(amax[0], 20.0f);
}

TEST(CpuCast, WidensAndNarrowsBetweenF32AndF64) {
  std::vector<double> wide = test::random_vector(1001, 5);
  std::vector<float> narrow(wide.size());
  cpu_backend().cast({view(narrow, {1001}), view(wide, {1001})});
  for (size_t i = 0; i < wide.size(); ++i) ASSERT_EQ(narrow[i], static_cast<float>(wide[i]));
  std::vector<double> back(wide.size());
  cpu_backend().cast({view(back, {1001}), view(narrow, {1001})});
  for (size_t i = 0; i < wide.size(); ++i) ASSERT_EQ(back[i], static_cast<double>(narrow[i]));
}

TEST(CpuCast, RejectsBadArguments) {
  std::vector<float> x(4, 1.0f);
  std::vector<uint8_t> a(4), b(4);
  std::vector<float> y(4);
  std::vector<int32_t> counts(2);
  std::vector<float> wrong_counts(2);
  Tensor e4m3(a.data(), {4}, DType::E4M3), e5m2(b.data(), {4}, DType::E5M2);
  std::vector<int32_t> ints(4);
  EXPECT_NE(test::error_message([&] { cpu_backend().cast({view(ints, {4}), view(x, {4})}); }).find("no conversion"),
            std::string::npos);
  // Narrow to narrow goes through FP32, with the scaling states' scales: no explicit scale then.
  EXPECT_THROW(cpu_backend().cast({e5m2, e4m3, 2.0f}), Error);
  EXPECT_THROW(cpu_backend().cast({e4m3, view(x, {4}), 0.0f}), Error);
  EXPECT_THROW(cpu_backend().cast({e4m3, view(x, {4}), NAN}), Error);
  EXPECT_THROW(cpu_backend().cast({e4m3, view(x, {2, 2}).prefix({3})}), Error);
  EXPECT_THROW(cpu_backend().cast({view(y, {4}), view(x, {4}), 2.0f}), Error);  // f32 -> f32 takes no scale
  EXPECT_THROW(cpu_backend().cast({e4m3, view(x, {4}), 1.0f, true, Tensor(), view(wrong_counts, {2})}), Error);
  EXPECT_THROW(cpu_backend().cast({view(y, {4}), e4m3, 1.0f, true, Tensor(), view(counts, {2})}), Error);
  QuantizeRoundtripArgs q;
  q.out = view(y, {4});
  q.in = view(x, {4});
  q.format = DType::F32;
  EXPECT_THROW(cpu_backend().quantize_roundtrip(q), Error);
  q.format = DType::E4M3;
  q.out = e4m3;
  EXPECT_THROW(cpu_backend().quantize_roundtrip(q), Error);
}


// The BF16 round trip of FP32 without scale or statistics (the recipes' rounding of every activation)
// takes a vectorised bit-arithmetic path: bit for bit the scalar conversion, on spread values and on
// random bit patterns (every exponent, subnormals, inf and NaN payloads included).
TEST(QuantizeRoundtrip, Bf16FastPathEqualsTheScalarConversion) {
  std::vector<float> in = spread_values<float>(kCount, 91);
  std::mt19937 rng(5);
  for (int i = 0; i < 200000; ++i) in.push_back(f32_from_bits(static_cast<uint32_t>(rng())));
  for (uint32_t u : {0x7F7FFFFFu, 0xFF7FFFFFu, 0x7F7F8000u, 0x7F7F7FFFu, 0x00008000u, 0x0000C000u, 0x7F800001u,
                     0xFFFFFFFFu, 0x3F808000u, 0x3F818000u})
    in.push_back(f32_from_bits(u));
  std::vector<float> out(in.size());
  QuantizeRoundtripArgs q;
  q.in = Tensor(in.data(), {static_cast<int64_t>(in.size())});
  q.out = Tensor(out.data(), {static_cast<int64_t>(out.size())});
  q.format = DType::BF16;
  cpu_backend().quantize_roundtrip(q);
  for (size_t i = 0; i < in.size(); ++i) {
    const float want = Bf16Format::decode(Bf16Format::encode(in[i]));
    if (std::isnan(want)) ASSERT_TRUE(std::isnan(out[i])) << i;
    else ASSERT_EQ(f32_bits(out[i]), f32_bits(want)) << "input bits " << std::hex << f32_bits(in[i]);
  }
}

// Every halfway point between neighbouring codes of each format (where round-to-nearest-even decides),
// one FP32 ulp either side of it, and the codes themselves, both signs, scaled by 3 and unscaled: the
// FP32 round trip (whose normal-range fast path rounds by integer arithmetic) equals the scalar
// conversion bit for bit.
template <class Fmt>
void expect_ties_round_like_the_scalar_path() {
  std::vector<float> in;
  for (uint32_t c = 0; c < Fmt::kMaxCode; ++c) {
    const float a = Fmt::decode(static_cast<typename Fmt::Storage>(c));
    const float b = Fmt::decode(static_cast<typename Fmt::Storage>(c + 1));
    const float mid = a + (b - a) / 2;  // exact: the formats have far fewer mantissa bits than FP32
    for (float x : {a, mid, std::nextafter(mid, 0.0f), std::nextafter(mid, b), b}) {
      in.push_back(x);
      in.push_back(-x);
    }
  }
  for (float scale : {1.0f, 3.0f}) {
    std::vector<float> source(in.size()), out(in.size());
    for (size_t i = 0; i < in.size(); ++i) source[i] = in[i] / scale;
    QuantizeRoundtripArgs q;
    q.in = Tensor(source.data(), {static_cast<int64_t>(source.size())});
    q.out = Tensor(out.data(), {static_cast<int64_t>(out.size())});
    q.format = dtype_of<Fmt>();
    q.scale = scale;
    cpu_backend().quantize_roundtrip(q);
    for (size_t i = 0; i < in.size(); ++i) {
      const auto code = Fmt::encode(source[i] * scale, true);
      const float want = Fmt::decode(code) * (1.0f / scale);
      ASSERT_EQ(f32_bits(out[i]), f32_bits(want)) << "scale " << scale << " input bits " << std::hex << f32_bits(in[i]);
    }
  }
}

TEST(QuantizeRoundtrip, TiesRoundLikeTheScalarConversion) {
  expect_ties_round_like_the_scalar_path<Bf16Format>();
  expect_ties_round_like_the_scalar_path<F16Format>();
  expect_ties_round_like_the_scalar_path<E4m3Format>();
  expect_ties_round_like_the_scalar_path<E5m2Format>();
}
}  // namespace
}  // namespace gpt
