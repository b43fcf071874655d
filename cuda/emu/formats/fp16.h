// Emulated cuda_fp16.h: __half, __half2 and the intrinsics our kernels use, bit for bit as the device
// rounds them (conversions round to nearest even once; arithmetic as add/mul/fma.rn.f16).
#pragma once

#include "emu/formats/narrow16.h"

// The runtime's vector type (emu/runtime.h defines it, as CUDA's vector_types.h does); declared here so the
// conversions to it below can name it as their default result type.
struct float2;

namespace gpt::emu {

struct __half_raw {
  unsigned short x;
};
struct alignas(4) __half2_raw {  // __CUDA_ALIGN__(4), as the toolkit has it
  unsigned short x, y;
};
using __half = detail::Narrow16<F16Format, __half_raw>;
using __half2 = detail::Narrow16x2<__half, __half2_raw>;

inline __half __float2half(float f) { return __half(f); }
inline __half __float2half_rn(float f) { return __half(f); }
inline __half __double2half(double d) { return __half(d); }
inline float __half2float(__half h) { return float(h); }
inline __half2 __floats2half2_rn(float a, float b) { return __half2(__half(a), __half(b)); }
inline __half2 __float2half2_rn(float a) { return __half2(__half(a), __half(a)); }
inline __half2 __halves2half2(__half a, __half b) { return __half2(a, b); }
// float2 is the runtime's vector type (emu/runtime.h); any type with float members x and y is accepted.
template <class Float2>
__half2 __float22half2_rn(const Float2& f) {
  return __half2(__half(static_cast<float>(f.x)), __half(static_cast<float>(f.y)));
}
template <class Float2 = ::float2>
Float2 __half22float2(__half2 h) {
  return Float2{float(h.x), float(h.y)};
}
inline float __low2float(__half2 h) { return float(h.x); }
inline float __high2float(__half2 h) { return float(h.y); }
inline __half __low2half(__half2 h) { return h.x; }
inline __half __high2half(__half2 h) { return h.y; }

inline unsigned short __half_as_ushort(__half h) { return h.code(); }
inline __half __ushort_as_half(unsigned short u) { return __half::bits(u); }

inline __half __hadd(__half a, __half b) { return a + b; }
inline __half __hsub(__half a, __half b) { return a - b; }
inline __half __hmul(__half a, __half b) { return a * b; }
inline __half __hfma(__half a, __half b, __half c) {
  return __half::bits(detail::fma_rn<F16Format>(a.code(), b.code(), c.code()));
}
inline __half __hneg(__half a) { return -a; }
inline __half __habs(__half a) { return __half::bits(static_cast<unsigned short>(a.code() & 0x7FFFu)); }
inline __half2 __hadd2(__half2 a, __half2 b) { return __half2(a.x + b.x, a.y + b.y); }
inline __half2 __hmul2(__half2 a, __half2 b) { return __half2(a.x * b.x, a.y * b.y); }
inline __half2 __hfma2(__half2 a, __half2 b, __half2 c) { return __half2(__hfma(a.x, b.x, c.x), __hfma(a.y, b.y, c.y)); }

}  // namespace gpt::emu

using gpt::emu::__half_raw;
using gpt::emu::__half2_raw;
using gpt::emu::__half;
using gpt::emu::__half2;
using gpt::emu::__float2half;
using gpt::emu::__float2half_rn;
using gpt::emu::__double2half;
using gpt::emu::__half2float;
using gpt::emu::__floats2half2_rn;
using gpt::emu::__float2half2_rn;
using gpt::emu::__halves2half2;
using gpt::emu::__float22half2_rn;
using gpt::emu::__half22float2;
using gpt::emu::__low2float;
using gpt::emu::__high2float;
using gpt::emu::__low2half;
using gpt::emu::__high2half;
using gpt::emu::__half_as_ushort;
using gpt::emu::__ushort_as_half;
using gpt::emu::__hadd;
using gpt::emu::__hsub;
using gpt::emu::__hmul;
using gpt::emu::__hfma;
using gpt::emu::__hneg;
using gpt::emu::__habs;
using gpt::emu::__hadd2;
using gpt::emu::__hmul2;
using gpt::emu::__hfma2;
