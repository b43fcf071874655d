// The class behind the emulated __half and __nv_bfloat16: a 16-bit code with CUDA's conversions
// (implicit from and to float, as cuda_fp16.hpp / cuda_bf16.hpp have them unless
// __CUDA_NO_HALF_CONVERSIONS__ is defined) and operators that round once like the device instructions.
//
// The types live in gpt::emu and are brought to the global namespace by using-declarations in fp16.h
// and bf16.h, so their mangled names never collide with the toolkit's when a test links both
// (inline members of two different classes named ::__half would be merged by the linker).
#pragma once

#include "emu/formats/rounding.h"

namespace gpt::emu::detail {

template <class Format, class Raw>
class Narrow16 {
 public:
  using format = Format;

  Narrow16() = default;
  Narrow16(const Raw& r) : __x(r.x) {}
  Narrow16(float f) : __x(Format::encode(f)) {}
  Narrow16(double d) : __x(Format::encode(d)) {}
  // Every 32-bit integer is exact in double, so converting through it rounds once (as __int2half_rn).
  Narrow16(int i) : __x(Format::encode(static_cast<double>(i))) {}
  Narrow16(unsigned int i) : __x(Format::encode(static_cast<double>(i))) {}
  Narrow16(short i) : __x(Format::encode(static_cast<double>(i))) {}
  Narrow16(unsigned short i) : __x(Format::encode(static_cast<double>(i))) {}

  operator float() const { return Format::decode(__x); }
  operator Raw() const { return Raw{__x}; }
  Narrow16& operator=(const Raw& r) {
    __x = r.x;
    return *this;
  }

  friend Narrow16 operator+(Narrow16 a, Narrow16 b) { return bits(add_rn<Format>(a.__x, b.__x)); }
  friend Narrow16 operator-(Narrow16 a, Narrow16 b) { return bits(add_rn<Format>(a.__x, negated(b.__x))); }
  friend Narrow16 operator*(Narrow16 a, Narrow16 b) { return bits(mul_rn<Format>(a.__x, b.__x)); }
  friend Narrow16 operator-(Narrow16 a) { return bits(negated(a.__x)); }
  friend Narrow16 operator+(Narrow16 a) { return a; }
  Narrow16& operator+=(Narrow16 b) { return *this = *this + b; }
  Narrow16& operator-=(Narrow16 b) { return *this = *this - b; }
  Narrow16& operator*=(Narrow16 b) { return *this = *this * b; }
  // Comparisons are IEEE's (NaN unordered), as __heq/__hlt and friends.
  friend bool operator==(Narrow16 a, Narrow16 b) { return float(a) == float(b); }
  friend bool operator!=(Narrow16 a, Narrow16 b) { return float(a) != float(b); }
  friend bool operator<(Narrow16 a, Narrow16 b) { return float(a) < float(b); }
  friend bool operator>(Narrow16 a, Narrow16 b) { return float(a) > float(b); }
  friend bool operator<=(Narrow16 a, Narrow16 b) { return float(a) <= float(b); }
  friend bool operator>=(Narrow16 a, Narrow16 b) { return float(a) >= float(b); }

  static Narrow16 bits(unsigned short code) { return Narrow16(Raw{code}); }
  unsigned short code() const { return __x; }

 protected:
  // The name of cuda_fp16.hpp's member, so code that reaches into it (llm.c does not) reads the same.
  unsigned short __x;

 private:
  static unsigned short negated(unsigned short c) { return static_cast<unsigned short>(c ^ 0x8000u); }
};

// The pair types (__half2, __nv_bfloat162): two scalars, x the low half of the 32-bit word, aligned to 4
// bytes like the toolkit's (__CUDA_ALIGN__(4)), so kernels may move a pair as one 32-bit word.
template <class Scalar, class Raw2>
struct alignas(4) Narrow16x2 {
  Scalar x, y;
  Narrow16x2() = default;
  Narrow16x2(Scalar a, Scalar b) : x(a), y(b) {}
  Narrow16x2(const Raw2& r) : x(Scalar::bits(r.x)), y(Scalar::bits(r.y)) {}
  operator Raw2() const { return Raw2{x.code(), y.code()}; }
};

}  // namespace gpt::emu::detail
