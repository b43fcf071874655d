// See toolkit_reference.h. Only the toolkit's headers are included here, never emu/: this translation
// unit sees the real __nv_bfloat16, __half and FP8 types and their host code paths.
#include "toolkit_reference.h"

#if __has_include(<cuda_bf16.h>) && __has_include(<cuda_fp16.h>) && __has_include(<cuda_fp8.h>)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstring>

// The layouts test_formats.cpp asserts for the emulated types, here for the toolkit's.
static_assert(sizeof(__half) == 2 && alignof(__half) == 2 && sizeof(__half2) == 4 && alignof(__half2) == 4);
static_assert(sizeof(__nv_bfloat16) == 2 && alignof(__nv_bfloat16) == 2);
static_assert(sizeof(__nv_bfloat162) == 4 && alignof(__nv_bfloat162) == 4);
static_assert(sizeof(__half2_raw) == 4 && alignof(__half2_raw) == 4 && alignof(__nv_bfloat162_raw) == 4);
static_assert(sizeof(__nv_fp8_e4m3) == 1 && sizeof(__nv_fp8_e5m2) == 1);

namespace gpt::test::toolkit {
namespace {

__nv_bfloat16 bf16(uint16_t code) {
  __nv_bfloat16_raw r;
  r.x = code;
  return __nv_bfloat16(r);
}
__half f16(uint16_t code) {
  __half_raw r;
  r.x = code;
  return __half(r);
}
uint16_t code(__nv_bfloat16 x) { return __nv_bfloat16_raw(x).x; }
uint16_t code(__half x) { return __half_raw(x).x; }
__nv_saturation_t sat(bool satfinite) { return satfinite ? __NV_SATFINITE : __NV_NOSAT; }
__nv_fp8_interpretation_t kind(bool e5m2) { return e5m2 ? __NV_E5M2 : __NV_E4M3; }

}  // namespace

bool available() { return true; }

uint16_t float_to_bf16(float x) { return code(__float2bfloat16(x)); }
uint16_t float_to_f16(float x) { return code(__float2half(x)); }
uint16_t double_to_bf16(double x) { return code(__double2bfloat16(x)); }
uint16_t double_to_f16(double x) { return code(__double2half(x)); }
float bf16_to_float(uint16_t c) { return __bfloat162float(bf16(c)); }
float f16_to_float(uint16_t c) { return __half2float(f16(c)); }
uint16_t bf16_add(uint16_t a, uint16_t b) { return code(__hadd(bf16(a), bf16(b))); }
uint16_t bf16_sub(uint16_t a, uint16_t b) { return code(__hsub(bf16(a), bf16(b))); }
uint16_t bf16_mul(uint16_t a, uint16_t b) { return code(__hmul(bf16(a), bf16(b))); }
uint16_t f16_add(uint16_t a, uint16_t b) { return code(__hadd(f16(a), f16(b))); }
uint16_t f16_sub(uint16_t a, uint16_t b) { return code(__hsub(f16(a), f16(b))); }
uint16_t f16_mul(uint16_t a, uint16_t b) { return code(__hmul(f16(a), f16(b))); }

uint8_t float_to_fp8(float x, bool s, bool e5m2) { return __nv_cvt_float_to_fp8(x, sat(s), kind(e5m2)); }
uint8_t double_to_fp8(double x, bool s, bool e5m2) { return __nv_cvt_double_to_fp8(x, sat(s), kind(e5m2)); }
uint8_t halfraw_to_fp8(uint16_t h, bool s, bool e5m2) {
  __half_raw r;
  r.x = h;
  return __nv_cvt_halfraw_to_fp8(r, sat(s), kind(e5m2));
}
uint8_t bfloat16raw_to_fp8(uint16_t b, bool s, bool e5m2) {
  __nv_bfloat16_raw r;
  r.x = b;
  return __nv_cvt_bfloat16raw_to_fp8(r, sat(s), kind(e5m2));
}
uint16_t fp8_to_halfraw(uint8_t c, bool e5m2) { return __nv_cvt_fp8_to_halfraw(c, kind(e5m2)).x; }
uint8_t fp8_class_from_float(float x, bool e5m2) {
  return e5m2 ? __nv_fp8_e5m2(x).__x : __nv_fp8_e4m3(x).__x;
}
float fp8_class_to_float(uint8_t c, bool e5m2) {
  if (e5m2) {
    __nv_fp8_e5m2 v;
    v.__x = c;
    return static_cast<float>(v);
  }
  __nv_fp8_e4m3 v;
  v.__x = c;
  return static_cast<float>(v);
}

}  // namespace gpt::test::toolkit

#else

// Without the toolkit's headers the comparisons skip (available() is false); nothing else is called.
namespace gpt::test::toolkit {
bool available() { return false; }
}  // namespace gpt::test::toolkit

#endif
