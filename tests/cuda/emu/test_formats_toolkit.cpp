// The emulated number formats (emu/formats.h) bit for bit against the CUDA toolkit's own host
// implementations (toolkit_reference.cpp): every 16-bit and 8-bit code decoded, and float inputs that
// cover every rounding case of every format (all 2^16 upper halves of a float, each with low halves at,
// just below and just above the halfway points of BF16 and F16; FP8's halfway points lie in the upper
// half), NaN, infinities, subnormals and saturation among them. The toolkit's host __hadd/__hsub/__hmul
// compute in float and round once more, which is exact for BF16 and F16 (24 >= 2p + 2 bits), so they are
// the device's results too; __hfma has no host version and is tested in test_formats.cpp.
#include "common/cuda_api.h"
#include "toolkit_reference.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace {

namespace tk = gpt::test::toolkit;

uint32_t bits(float x) { return gpt::f32_bits(x); }

// Floats around every rounding boundary of BF16 (low 16 bits dropped) and F16 (low 13 bits dropped).
std::vector<float> boundary_floats() {
  static const uint32_t kLow[] = {0x0000, 0x0001, 0x0FFF, 0x1000, 0x1001, 0x2000, 0x3000,
                                  0x7FFF, 0x8000, 0x8001, 0xBFFF, 0xF000, 0xFFFF};
  std::vector<float> xs;
  xs.reserve(65536 * std::size(kLow));
  for (uint32_t hi = 0; hi < 65536; ++hi)
    for (uint32_t lo : kLow) xs.push_back(gpt::f32_from_bits(hi << 16 | lo));
  return xs;
}

template <class Fp8>
Fp8 fp8_of(__nv_fp8_storage_t code) {
  Fp8 v;
  v.__x = code;
  return v;
}

#define GPT_REQUIRE_TOOLKIT() \
  if (!tk::available()) GTEST_SKIP() << "the CUDA toolkit's headers (cuda_bf16.h, ...) are not installed"

TEST(FormatsToolkit, DecodeEverySixteenBitCode) {
  GPT_REQUIRE_TOOLKIT();
  for (uint32_t c = 0; c < 65536; ++c) {
    const auto u = static_cast<uint16_t>(c);
    ASSERT_EQ(bits(__bfloat162float(__ushort_as_bfloat16(u))), bits(tk::bf16_to_float(u))) << std::hex << c;
    ASSERT_EQ(bits(__half2float(__ushort_as_half(u))), bits(tk::f16_to_float(u))) << std::hex << c;
  }
}

TEST(FormatsToolkit, EncodeBf16AndF16AtEveryRoundingBoundary) {
  GPT_REQUIRE_TOOLKIT();
  for (float x : boundary_floats()) {
    ASSERT_EQ(__bfloat16_as_ushort(__float2bfloat16(x)), tk::float_to_bf16(x)) << std::hex << bits(x);
    ASSERT_EQ(__bfloat16_as_ushort(__float2bfloat16_rn(x)), tk::float_to_bf16(x)) << std::hex << bits(x);
    ASSERT_EQ(__half_as_ushort(__float2half(x)), tk::float_to_f16(x)) << std::hex << bits(x);
  }
}

TEST(FormatsToolkit, Fp8EveryCodeAndEveryRoundingBoundary) {
  GPT_REQUIRE_TOOLKIT();
  for (bool e5m2 : {false, true}) {
    const auto k = e5m2 ? __NV_E5M2 : __NV_E4M3;
    for (uint32_t c = 0; c < 256; ++c) {
      const auto u = static_cast<__nv_fp8_storage_t>(c);
      ASSERT_EQ(__nv_cvt_fp8_to_halfraw(u, k).x, tk::fp8_to_halfraw(u, e5m2)) << e5m2 << " " << c;
      const float ours = e5m2 ? static_cast<float>(fp8_of<__nv_fp8_e5m2>(u)) : static_cast<float>(fp8_of<__nv_fp8_e4m3>(u));
      ASSERT_EQ(bits(ours), bits(tk::fp8_class_to_float(u, e5m2))) << e5m2 << " " << c;
    }
    for (float x : boundary_floats())
      for (bool sat : {false, true}) {
        ASSERT_EQ(__nv_cvt_float_to_fp8(x, sat ? __NV_SATFINITE : __NV_NOSAT, k), tk::float_to_fp8(x, sat, e5m2))
            << "e5m2 " << e5m2 << " sat " << sat << " x " << std::hex << bits(x);
      }
    for (float x : boundary_floats()) {
      const auto ours = e5m2 ? __nv_fp8_e5m2(x).__x : __nv_fp8_e4m3(x).__x;
      ASSERT_EQ(ours, tk::fp8_class_from_float(x, e5m2)) << std::hex << bits(x);
    }
    for (uint32_t c = 0; c < 65536; ++c)
      for (bool sat : {false, true}) {
        const auto u = static_cast<uint16_t>(c);
        const auto s = sat ? __NV_SATFINITE : __NV_NOSAT;
        ASSERT_EQ(__nv_cvt_halfraw_to_fp8(__half_raw{u}, s, k), tk::halfraw_to_fp8(u, sat, e5m2)) << c;
        ASSERT_EQ(__nv_cvt_bfloat16raw_to_fp8(__nv_bfloat16_raw{u}, s, k), tk::bfloat16raw_to_fp8(u, sat, e5m2)) << c;
      }
  }
}

// From double the conversions round once too (the toolkit's host path rounds to odd in float first):
// each boundary float nudged by one double ulp either way lands just off a halfway point. NaN payloads
// matter here: the double-to-FP8 path keeps some (fp8.h).
TEST(FormatsToolkit, EncodeFromDoubleRoundsOnce) {
  GPT_REQUIRE_TOOLKIT();
  for (float f : boundary_floats())
    for (double x : {std::nextafter(double(f), -INFINITY), double(f), std::nextafter(double(f), INFINITY)}) {
      ASSERT_EQ(__bfloat16_as_ushort(__double2bfloat16(x)), tk::double_to_bf16(x)) << x;
      ASSERT_EQ(__half_as_ushort(__double2half(x)), tk::double_to_f16(x)) << x;
      for (bool e5m2 : {false, true})
        for (bool sat : {false, true})
          ASSERT_EQ(__nv_cvt_double_to_fp8(x, sat ? __NV_SATFINITE : __NV_NOSAT, e5m2 ? __NV_E5M2 : __NV_E4M3),
                    tk::double_to_fp8(x, sat, e5m2))
              << x;
    }
}

TEST(FormatsToolkit, AddSubMulOnRandomAndSpecialCodes) {
  GPT_REQUIRE_TOOLKIT();
  std::mt19937 rng(12);
  std::vector<uint16_t> codes = {0x0000, 0x8000, 0x0001, 0x8001, 0x7F80, 0xFF80, 0x7C00, 0xFC00, 0x7FFF,
                                 0x7F7F, 0x7BFF, 0x3F80, 0x3C00, 0x0400, 0x0080, 0x03FF, 0x007F};
  for (int i = 0; i < 400; ++i) codes.push_back(static_cast<uint16_t>(rng()));
  for (uint16_t a : codes)
    for (uint16_t b : codes) {
      const auto ba = __ushort_as_bfloat16(a), bb = __ushort_as_bfloat16(b);
      const auto ha = __ushort_as_half(a), hb = __ushort_as_half(b);
      ASSERT_EQ(__bfloat16_as_ushort(__hadd(ba, bb)), tk::bf16_add(a, b)) << std::hex << a << " " << b;
      ASSERT_EQ(__bfloat16_as_ushort(__hsub(ba, bb)), tk::bf16_sub(a, b)) << std::hex << a << " " << b;
      ASSERT_EQ(__bfloat16_as_ushort(__hmul(ba, bb)), tk::bf16_mul(a, b)) << std::hex << a << " " << b;
      ASSERT_EQ(__half_as_ushort(__hadd(ha, hb)), tk::f16_add(a, b)) << std::hex << a << " " << b;
      ASSERT_EQ(__half_as_ushort(__hsub(ha, hb)), tk::f16_sub(a, b)) << std::hex << a << " " << b;
      ASSERT_EQ(__half_as_ushort(__hmul(ha, hb)), tk::f16_mul(a, b)) << std::hex << a << " " << b;
    }
}

}  // namespace
