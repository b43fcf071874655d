// Emulated cuda_bf16.h: __nv_bfloat16, __nv_bfloat162 and the intrinsics our kernels use, bit for bit as the device
// rounds them (conversions round to nearest even once; arithmetic as add/mul/fma.rn.bf16).
#pragma once

#include "emu/formats/narrow16.h"

// The runtime's vector type (emu/runtime.h defines it, as CUDA's vector_types.h does); declared here so the
// conversions to it below can name it as their default result type.
struct float2;

namespace gpt::emu {

struct __nv_bfloat16_raw {
  unsigned short x;
};
struct alignas(4) __nv_bfloat162_raw {  // __CUDA_ALIGN__(4), as the toolkit has it
  unsigned short x, y;
};
using __nv_bfloat16 = detail::Narrow16<Bf16Format, __nv_bfloat16_raw>;
using __nv_bfloat162 = detail::Narrow16x2<__nv_bfloat16, __nv_bfloat162_raw>;

inline __nv_bfloat16 __float2bfloat16(float f) { return __nv_bfloat16(f); }
inline __nv_bfloat16 __float2bfloat16_rn(float f) { return __nv_bfloat16(f); }
inline __nv_bfloat16 __double2bfloat16(double d) { return __nv_bfloat16(d); }
inline float __bfloat162float(__nv_bfloat16 h) { return float(h); }
inline __nv_bfloat162 __floats2bfloat162_rn(float a, float b) { return __nv_bfloat162(__nv_bfloat16(a), __nv_bfloat16(b)); }
inline __nv_bfloat162 __float2bfloat162_rn(float a) { return __nv_bfloat162(__nv_bfloat16(a), __nv_bfloat16(a)); }
inline __nv_bfloat162 __halves2bfloat162(__nv_bfloat16 a, __nv_bfloat16 b) { return __nv_bfloat162(a, b); }
// float2 is the runtime's vector type (emu/runtime.h); any type with float members x and y is accepted.
template <class Float2>
__nv_bfloat162 __float22bfloat162_rn(const Float2& f) {
  return __nv_bfloat162(__nv_bfloat16(static_cast<float>(f.x)), __nv_bfloat16(static_cast<float>(f.y)));
}
template <class Float2 = ::float2>
Float2 __bfloat1622float2(__nv_bfloat162 h) {
  return Float2{float(h.x), float(h.y)};
}
inline float __low2float(__nv_bfloat162 h) { return float(h.x); }
inline float __high2float(__nv_bfloat162 h) { return float(h.y); }
inline __nv_bfloat16 __low2bfloat16(__nv_bfloat162 h) { return h.x; }
inline __nv_bfloat16 __high2bfloat16(__nv_bfloat162 h) { return h.y; }

inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 h) { return h.code(); }
inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short u) { return __nv_bfloat16::bits(u); }

inline __nv_bfloat16 __hadd(__nv_bfloat16 a, __nv_bfloat16 b) { return a + b; }
inline __nv_bfloat16 __hsub(__nv_bfloat16 a, __nv_bfloat16 b) { return a - b; }
inline __nv_bfloat16 __hmul(__nv_bfloat16 a, __nv_bfloat16 b) { return a * b; }
inline __nv_bfloat16 __hfma(__nv_bfloat16 a, __nv_bfloat16 b, __nv_bfloat16 c) {
  return __nv_bfloat16::bits(detail::fma_rn<Bf16Format>(a.code(), b.code(), c.code()));
}
inline __nv_bfloat16 __hneg(__nv_bfloat16 a) { return -a; }
inline __nv_bfloat16 __habs(__nv_bfloat16 a) { return __nv_bfloat16::bits(static_cast<unsigned short>(a.code() & 0x7FFFu)); }
inline __nv_bfloat162 __hadd2(__nv_bfloat162 a, __nv_bfloat162 b) { return __nv_bfloat162(a.x + b.x, a.y + b.y); }
inline __nv_bfloat162 __hmul2(__nv_bfloat162 a, __nv_bfloat162 b) { return __nv_bfloat162(a.x * b.x, a.y * b.y); }
inline __nv_bfloat162 __hfma2(__nv_bfloat162 a, __nv_bfloat162 b, __nv_bfloat162 c) { return __nv_bfloat162(__hfma(a.x, b.x, c.x), __hfma(a.y, b.y, c.y)); }

}  // namespace gpt::emu

using gpt::emu::__nv_bfloat16_raw;
using gpt::emu::__nv_bfloat162_raw;
using gpt::emu::__nv_bfloat16;
using gpt::emu::__nv_bfloat162;
using gpt::emu::__float2bfloat16;
using gpt::emu::__float2bfloat16_rn;
using gpt::emu::__double2bfloat16;
using gpt::emu::__bfloat162float;
using gpt::emu::__floats2bfloat162_rn;
using gpt::emu::__float2bfloat162_rn;
using gpt::emu::__halves2bfloat162;
using gpt::emu::__float22bfloat162_rn;
using gpt::emu::__bfloat1622float2;
using gpt::emu::__low2float;
using gpt::emu::__high2float;
using gpt::emu::__low2bfloat16;
using gpt::emu::__high2bfloat16;
using gpt::emu::__bfloat16_as_ushort;
using gpt::emu::__ushort_as_bfloat16;
using gpt::emu::__hadd;
using gpt::emu::__hsub;
using gpt::emu::__hmul;
using gpt::emu::__hfma;
using gpt::emu::__hneg;
using gpt::emu::__habs;
using gpt::emu::__hadd2;
using gpt::emu::__hmul2;
using gpt::emu::__hfma2;
