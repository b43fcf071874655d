// Exact conversions between FP32/FP64 and the narrow floating-point formats of mixed-precision training:
//
//   format  bits  exponent  mantissa  bias  max         min normal  min subnormal  inf  NaN
//   bf16    16    8         7         127   0x1.FEp127  2^-126      2^-133         yes  exp all ones, mantissa != 0
//   f16     16    5         10        15    65504       2^-14       2^-24          yes  exp all ones, mantissa != 0
//   e4m3    8     4         3         7     448         2^-6        2^-9           no   S.1111.111 only (OCP E4M3FN)
//   e5m2    8     5         2         15    57344       2^-14       2^-16          yes  exp all ones, mantissa != 0
//
// Encoding rounds to nearest, ties to even, in one rounding from the FP32 or FP64 input (never through
// an intermediate format), with subnormals produced, not flushed. The rules follow NVIDIA's conversions
// (cvt.rn{.satfinite} and cuda_fp8.hpp), so the CPU emulation and the CUDA backend store the same codes:
//   - NaN in: the positive canonical NaN, all mantissa bits set (bf16/f16 0x7FFF, e4m3/e5m2 0x7F).
//   - Overflow, i.e. a magnitude that rounds above max: saturating, +-max; otherwise +-inf for the
//     formats with infinities and NaN (sign kept, S.1111.111) for e4m3. +-inf in overflows likewise.
//     FP8 saturates by default (Transformer Engine's satfinite); bf16 and f16 are IEEE (overflow to inf,
//     which is what dynamic loss scaling detects).
//   - A magnitude at or below half the smallest subnormal rounds to zero; the sign of zero is kept.
// Decoding is exact (every code of every format is an FP32 value). NaN codes decode to the canonical
// FP32 NaN 0x7FFFFFFF, except bf16, which widens by a 16-bit shift and keeps sign and payload.
//
// Header-only and C++17 (nvcc compiles device code as C++17): the same functions run in CUDA kernels.
#pragma once

#include "core/dtype.h"
#include "core/philox.h"  // GPT_HOST_DEVICE

#include <cstdint>
#include <cstring>

namespace gpt {

GPT_HOST_DEVICE uint32_t f32_bits(float x) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(x);
#else
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
#endif
}

GPT_HOST_DEVICE float f32_from_bits(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
#endif
}

GPT_HOST_DEVICE uint64_t f64_bits(double x) {
#if defined(__CUDA_ARCH__)
  return static_cast<uint64_t>(__double_as_longlong(x));
#else
  uint64_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
#endif
}

namespace detail {

// The layout of an IEEE-754 binary source (float or double) seen as an unsigned integer.
template <class UInt, int kExp, int kMan>
struct SourceLayout {
  using Bits = UInt;
  static constexpr int kExpBits = kExp;
  static constexpr int kManBits = kMan;
  static constexpr int kBias = (1 << (kExp - 1)) - 1;
  static constexpr UInt kSign = UInt(1) << (kExp + kMan);
  static constexpr UInt kInf = ((UInt(1) << kExp) - 1) << kMan;
};
using F32Layout = SourceLayout<uint32_t, 8, 23>;
using F64Layout = SourceLayout<uint64_t, 11, 52>;

// Rounds the source value with bits `bits` to the target format (kExp exponent bits, kMan mantissa bits,
// bias 2^(kExp-1)-1). kHasInf: the top exponent holds inf and NaN (IEEE); otherwise only the all-ones
// code is NaN and the rest of the top binade is finite (E4M3FN). Returns the code in the low bits.
//
// Math: with sig the source significand (implicit bit included) and e its unbiased exponent, the value
// is sig * 2^(e - kSrcMan). The target quantum at exponent te = max(e, emin) is 2^(te - kMan), so the
// rounded significand is q = RNE(sig / 2^shift), shift = kSrcMan - kMan + (te - e). The code is then
// (te - emin) << kMan plus q: a carry out of q (rounding up to the next binade) and the step from
// subnormal (te = emin, q < 2^kMan) to normal both fall out of that one addition.
template <int kExp, int kMan, bool kHasInf, class Src>
GPT_HOST_DEVICE uint32_t round_to_format(typename Src::Bits bits, bool saturate) {
  using UInt = typename Src::Bits;
  constexpr int kEmin = 2 - (1 << (kExp - 1));
  constexpr uint32_t kSignBit = 1u << (kExp + kMan);
  constexpr uint32_t kTopExp = ((1u << kExp) - 1) << kMan;
  constexpr uint32_t kNaN = kTopExp | ((1u << kMan) - 1);
  constexpr uint32_t kMaxFinite = kHasInf ? kTopExp - 1 : kNaN - 1;
  constexpr uint32_t kOverflow = kHasInf ? kTopExp : kNaN;

  const uint32_t sign = (bits & Src::kSign) ? kSignBit : 0u;
  const UInt abs = bits & (Src::kSign - 1);
  if (abs > Src::kInf) return kNaN;
  if (abs != Src::kInf) {
    const int biased = static_cast<int>(abs >> Src::kManBits);
    const UInt man = abs & ((UInt(1) << Src::kManBits) - 1);
    const UInt sig = biased ? (man | (UInt(1) << Src::kManBits)) : man;
    const int e = (biased ? biased : 1) - Src::kBias;
    const int te = e > kEmin ? e : kEmin;
    const int shift = Src::kManBits - kMan + (te - e);
    UInt q = 0;
    // sig < 2^(kSrcMan+1): past this shift the quotient is below one half and rounds to zero.
    if (shift <= Src::kManBits + 1) {
      const UInt half = UInt(1) << (shift - 1);
      const UInt rem = sig & ((half << 1) - 1);
      q = sig >> shift;
      if (rem > half || (rem == half && (q & 1))) ++q;
    }
    // te - emin < 2^11 and q <= 2^(kMan+1): no 32-bit overflow for any source and format here.
    const uint32_t c = (static_cast<uint32_t>(te - kEmin) << kMan) + static_cast<uint32_t>(q);
    if (c <= kMaxFinite) return sign | c;
  }
  return sign | (saturate ? kMaxFinite : kOverflow);
}

// 2^k as a float, for -126 <= k <= 127.
GPT_HOST_DEVICE float pow2f(int k) { return f32_from_bits(static_cast<uint32_t>(k + 127) << 23); }

// Exact decode of a code of a format with at most 8 exponent bits (f16, e4m3, e5m2; bf16 has its own).
template <int kExp, int kMan, bool kHasInf>
GPT_HOST_DEVICE float decode_format(uint32_t code) {
  constexpr int kBias = (1 << (kExp - 1)) - 1;
  constexpr uint32_t kManMask = (1u << kMan) - 1;
  constexpr uint32_t kExpMask = (1u << kExp) - 1;
  const uint32_t sign = (code >> (kExp + kMan)) & 1u;
  const uint32_t e = (code >> kMan) & kExpMask;
  const uint32_t m = code & kManMask;
  if (e == kExpMask && (kHasInf || m == kManMask)) {
    if (kHasInf && m == 0) return f32_from_bits((sign << 31) | 0x7F800000u);
    return f32_from_bits(0x7FFFFFFFu);
  }
  if (e == 0) {
    // Subnormal: m * 2^(1 - bias - kMan), exact in FP32 (a small integer times a power of two).
    const float v = static_cast<float>(m) * pow2f(1 - kBias - kMan);
    return sign ? -v : v;
  }
  return f32_from_bits((sign << 31) | ((e - kBias + 127) << 23) | (m << (23 - kMan)));
}

}  // namespace detail

// Format traits: storage type, limits and the conversions, for templates over the format (the CPU cast
// ops, later the CUDA kernels). kMax etc. are exact FP32 values. kMaxCode is the code of +max; kMaxCode + 1
// is what a non-saturating overflow gives (+inf, or NaN for e4m3), so a kernel can count overflows.
struct Bf16Format {
  using Storage = uint16_t;
  static constexpr int kExpBits = 8, kManBits = 7;
  static constexpr bool kHasInf = true;
  static constexpr float kMax = 0x1.FEp127f, kMinNormal = 0x1p-126f, kMinSubnormal = 0x1p-133f;
  static constexpr Storage kCanonicalNaN = 0x7FFF;
  static constexpr Storage kMaxCode = 0x7F7F, kSignMask = 0x8000;
  GPT_HOST_DEVICE static Storage encode(float x, bool saturate = false) {
    return static_cast<Storage>(detail::round_to_format<8, 7, true, detail::F32Layout>(f32_bits(x), saturate));
  }
  GPT_HOST_DEVICE static Storage encode(double x, bool saturate = false) {
    return static_cast<Storage>(detail::round_to_format<8, 7, true, detail::F64Layout>(f64_bits(x), saturate));
  }
  GPT_HOST_DEVICE static float decode(Storage c) { return f32_from_bits(static_cast<uint32_t>(c) << 16); }
};

struct F16Format {
  using Storage = uint16_t;
  static constexpr int kExpBits = 5, kManBits = 10;
  static constexpr bool kHasInf = true;
  static constexpr float kMax = 65504.0f, kMinNormal = 0x1p-14f, kMinSubnormal = 0x1p-24f;
  static constexpr Storage kCanonicalNaN = 0x7FFF;
  static constexpr Storage kMaxCode = 0x7BFF, kSignMask = 0x8000;
  GPT_HOST_DEVICE static Storage encode(float x, bool saturate = false) {
    return static_cast<Storage>(detail::round_to_format<5, 10, true, detail::F32Layout>(f32_bits(x), saturate));
  }
  GPT_HOST_DEVICE static Storage encode(double x, bool saturate = false) {
    return static_cast<Storage>(detail::round_to_format<5, 10, true, detail::F64Layout>(f64_bits(x), saturate));
  }
  GPT_HOST_DEVICE static float decode(Storage c) { return detail::decode_format<5, 10, true>(c); }
};

struct E4m3Format {
  using Storage = uint8_t;
  static constexpr int kExpBits = 4, kManBits = 3;
  static constexpr bool kHasInf = false;
  static constexpr float kMax = 448.0f, kMinNormal = 0x1p-6f, kMinSubnormal = 0x1p-9f;
  static constexpr Storage kCanonicalNaN = 0x7F;
  static constexpr Storage kMaxCode = 0x7E, kSignMask = 0x80;
  GPT_HOST_DEVICE static Storage encode(float x, bool saturate = true) {
    return static_cast<Storage>(detail::round_to_format<4, 3, false, detail::F32Layout>(f32_bits(x), saturate));
  }
  GPT_HOST_DEVICE static Storage encode(double x, bool saturate = true) {
    return static_cast<Storage>(detail::round_to_format<4, 3, false, detail::F64Layout>(f64_bits(x), saturate));
  }
  GPT_HOST_DEVICE static float decode(Storage c) { return detail::decode_format<4, 3, false>(c); }
};

struct E5m2Format {
  using Storage = uint8_t;
  static constexpr int kExpBits = 5, kManBits = 2;
  static constexpr bool kHasInf = true;
  static constexpr float kMax = 57344.0f, kMinNormal = 0x1p-14f, kMinSubnormal = 0x1p-16f;
  static constexpr Storage kCanonicalNaN = 0x7F;
  static constexpr Storage kMaxCode = 0x7B, kSignMask = 0x80;
  GPT_HOST_DEVICE static Storage encode(float x, bool saturate = true) {
    return static_cast<Storage>(detail::round_to_format<5, 2, true, detail::F32Layout>(f32_bits(x), saturate));
  }
  GPT_HOST_DEVICE static Storage encode(double x, bool saturate = true) {
    return static_cast<Storage>(detail::round_to_format<5, 2, true, detail::F64Layout>(f64_bits(x), saturate));
  }
  GPT_HOST_DEVICE static float decode(Storage c) { return detail::decode_format<5, 2, true>(c); }
};

// The scalar API. The FP64 overloads round once from the double (no detour through FP32).
GPT_HOST_DEVICE uint16_t f32_to_bf16(float x) { return Bf16Format::encode(x); }
GPT_HOST_DEVICE uint16_t f64_to_bf16(double x) { return Bf16Format::encode(x); }
GPT_HOST_DEVICE float bf16_to_f32(uint16_t c) { return Bf16Format::decode(c); }

GPT_HOST_DEVICE uint16_t f32_to_f16(float x) { return F16Format::encode(x); }
GPT_HOST_DEVICE uint16_t f64_to_f16(double x) { return F16Format::encode(x); }
GPT_HOST_DEVICE float f16_to_f32(uint16_t c) { return F16Format::decode(c); }

GPT_HOST_DEVICE uint8_t f32_to_e4m3(float x, bool saturate = true) { return E4m3Format::encode(x, saturate); }
GPT_HOST_DEVICE uint8_t f64_to_e4m3(double x, bool saturate = true) { return E4m3Format::encode(x, saturate); }
GPT_HOST_DEVICE float e4m3_to_f32(uint8_t c) { return E4m3Format::decode(c); }

GPT_HOST_DEVICE uint8_t f32_to_e5m2(float x, bool saturate = true) { return E5m2Format::encode(x, saturate); }
GPT_HOST_DEVICE uint8_t f64_to_e5m2(double x, bool saturate = true) { return E5m2Format::encode(x, saturate); }
GPT_HOST_DEVICE float e5m2_to_f32(uint8_t c) { return E5m2Format::decode(c); }

// Largest finite value of a narrow float dtype (BF16, F16, E4M3, E5M2); 0 for any other dtype.
constexpr float float_format_max(DType t) {
  switch (t) {
    case DType::BF16: return Bf16Format::kMax;
    case DType::F16: return F16Format::kMax;
    case DType::E4M3: return E4m3Format::kMax;
    case DType::E5M2: return E5m2Format::kMax;
    default: return 0.0f;
  }
}

constexpr bool is_narrow_float(DType t) {
  return t == DType::BF16 || t == DType::F16 || t == DType::E4M3 || t == DType::E5M2;
}

// One switch from a narrow float dtype to its format traits, for templates over the format; false (and no
// call) for any other dtype.
template <class Fn>
bool visit_float_format(DType t, Fn&& fn) {
  switch (t) {
    case DType::BF16: fn(Bf16Format{}); return true;
    case DType::F16: fn(F16Format{}); return true;
    case DType::E4M3: fn(E4m3Format{}); return true;
    case DType::E5M2: fn(E5m2Format{}); return true;
    default: return false;
  }
}

// The exact value of element i of a host buffer of dtype t (F32, F64, BF16, F16, E4M3, E5M2; NaN for any
// other dtype), unscaled: host code's one way to read a float tensor of any format.
inline double decode_element(DType t, const void* data, size_t i) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  if (t == DType::F32) {
    float v;
    std::memcpy(&v, bytes + 4 * i, sizeof v);
    return v;
  }
  if (t == DType::F64) {
    double v;
    std::memcpy(&v, bytes + 8 * i, sizeof v);
    return v;
  }
  double value = __builtin_nan("");
  visit_float_format(t, [&](auto format) {
    using Fmt = decltype(format);
    typename Fmt::Storage code;
    std::memcpy(&code, bytes + sizeof(code) * i, sizeof code);
    value = Fmt::decode(code);
  });
  return value;
}

}  // namespace gpt
