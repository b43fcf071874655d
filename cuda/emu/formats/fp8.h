// Emulated cuda_fp8.h: the FP8 storage types, __nv_cvt_* conversions and the __nv_fp8_e4m3 /
// __nv_fp8_e5m2 classes, with the enumerators' values of the toolkit header.
//
// Conversions to FP8 round to nearest even once from the input (cvt.rn.satfinite{.e4m3x2,.e5m2x2});
// __NV_SATFINITE clamps to +-max, __NV_NOSAT overflows to NaN (E4M3, which has no inf) or inf (E5M2),
// with the sign kept; NaN in gives the canonical 0x7F (but see __nv_cvt_double_to_fp8). Conversions from FP8 to half are exact; a NaN
// code gives the half NaN 0x7FFF with the sign discarded, as cuda_fp8.hpp's host path does.
#pragma once

#include "emu/formats/bf16.h"
#include "emu/formats/fp16.h"

namespace gpt::emu {

using __nv_fp8_storage_t = unsigned char;
using __nv_fp8x2_storage_t = unsigned short;
using __nv_fp8x4_storage_t = unsigned int;

enum __nv_saturation_t { __NV_NOSAT = 0, __NV_SATFINITE = 1 };
enum __nv_fp8_interpretation_t { __NV_E4M3 = 0, __NV_E5M2 = 1 };

inline __nv_fp8_storage_t __nv_cvt_double_to_fp8(double x, __nv_saturation_t sat, __nv_fp8_interpretation_t k) {
  // cuda_fp8.hpp keeps a double NaN's sign, and for E5M2 the payload's top two mantissa bits (0x7E | m);
  // the float overload canonicalises first, to 0x7F. This software path is the device's too (there is
  // no cvt from f64 to FP8).
  if (std::isnan(x)) {
    const uint64_t u = f64_bits(x);
    const unsigned sign = static_cast<unsigned>(u >> 63) << 7;
    return static_cast<__nv_fp8_storage_t>(sign | (k == __NV_E4M3 ? 0x7Fu : 0x7Eu | ((u >> 50) & 3u)));
  }
  const bool s = sat == __NV_SATFINITE;
  return k == __NV_E4M3 ? E4m3Format::encode(x, s) : E5m2Format::encode(x, s);
}
inline __nv_fp8_storage_t __nv_cvt_float_to_fp8(float x, __nv_saturation_t sat, __nv_fp8_interpretation_t k) {
  const bool s = sat == __NV_SATFINITE;
  return k == __NV_E4M3 ? E4m3Format::encode(x, s) : E5m2Format::encode(x, s);
}
inline __nv_fp8_storage_t __nv_cvt_halfraw_to_fp8(__half_raw x, __nv_saturation_t sat, __nv_fp8_interpretation_t k) {
  return __nv_cvt_float_to_fp8(F16Format::decode(x.x), sat, k);
}
inline __nv_fp8_storage_t __nv_cvt_bfloat16raw_to_fp8(__nv_bfloat16_raw x, __nv_saturation_t sat,
                                                      __nv_fp8_interpretation_t k) {
  return __nv_cvt_float_to_fp8(Bf16Format::decode(x.x), sat, k);
}
template <class Float2>
__nv_fp8x2_storage_t __nv_cvt_float2_to_fp8x2(const Float2& f, __nv_saturation_t sat, __nv_fp8_interpretation_t k) {
  return static_cast<__nv_fp8x2_storage_t>(__nv_cvt_float_to_fp8(static_cast<float>(f.x), sat, k) |
                                           (__nv_cvt_float_to_fp8(static_cast<float>(f.y), sat, k) << 8));
}

inline __half_raw __nv_cvt_fp8_to_halfraw(__nv_fp8_storage_t x, __nv_fp8_interpretation_t k) {
  if (k == __NV_E5M2) {
    // E5M2 is the upper byte of an F16 code.
    const auto h = static_cast<unsigned short>(x << 8);
    return __half_raw{static_cast<unsigned short>((h & 0x7FFFu) > 0x7C00u ? 0x7FFFu : h)};
  }
  if ((x & 0x7Fu) == 0x7Fu) return __half_raw{0x7FFF};
  return __half_raw{F16Format::encode(E4m3Format::decode(x))};
}
inline __half2_raw __nv_cvt_fp8x2_to_halfraw2(__nv_fp8x2_storage_t x, __nv_fp8_interpretation_t k) {
  return __half2_raw{__nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(x & 0xFFu), k).x,
                     __nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(x >> 8), k).x};
}

namespace detail {

// The two FP8 classes. As in cuda_fp8.hpp, the constructors saturate (__NV_SATFINITE), every conversion
// is explicit, and the value goes to float through half (exact, NaN canonical).
template <__nv_fp8_interpretation_t kKind>
struct Fp8 {
  __nv_fp8_storage_t __x;

  Fp8() = default;
  explicit Fp8(float f) : __x(__nv_cvt_float_to_fp8(f, __NV_SATFINITE, kKind)) {}
  explicit Fp8(double d) : __x(__nv_cvt_double_to_fp8(d, __NV_SATFINITE, kKind)) {}
  explicit Fp8(__half h) : __x(__nv_cvt_halfraw_to_fp8(__half_raw(h), __NV_SATFINITE, kKind)) {}
  explicit Fp8(__nv_bfloat16 b) : __x(__nv_cvt_bfloat16raw_to_fp8(__nv_bfloat16_raw(b), __NV_SATFINITE, kKind)) {}
  explicit Fp8(int i) : Fp8(static_cast<double>(i)) {}

  explicit operator float() const { return F16Format::decode(__nv_cvt_fp8_to_halfraw(__x, kKind).x); }
  explicit operator __half() const { return __half(__nv_cvt_fp8_to_halfraw(__x, kKind)); }
  explicit operator __nv_bfloat16() const { return __nv_bfloat16(static_cast<float>(*this)); }
};

}  // namespace detail

using __nv_fp8_e4m3 = detail::Fp8<__NV_E4M3>;
using __nv_fp8_e5m2 = detail::Fp8<__NV_E5M2>;

}  // namespace gpt::emu

using gpt::emu::__nv_fp8_storage_t;
using gpt::emu::__nv_fp8x2_storage_t;
using gpt::emu::__nv_fp8x4_storage_t;
using gpt::emu::__nv_saturation_t;
using gpt::emu::__NV_NOSAT;
using gpt::emu::__NV_SATFINITE;
using gpt::emu::__nv_fp8_interpretation_t;
using gpt::emu::__NV_E4M3;
using gpt::emu::__NV_E5M2;
using gpt::emu::__nv_cvt_double_to_fp8;
using gpt::emu::__nv_cvt_float_to_fp8;
using gpt::emu::__nv_cvt_halfraw_to_fp8;
using gpt::emu::__nv_cvt_bfloat16raw_to_fp8;
using gpt::emu::__nv_cvt_float2_to_fp8x2;
using gpt::emu::__nv_cvt_fp8_to_halfraw;
using gpt::emu::__nv_cvt_fp8x2_to_halfraw2;
using gpt::emu::__nv_fp8_e4m3;
using gpt::emu::__nv_fp8_e5m2;
