// The IEEE round-to-nearest single-precision intrinsics of device code (CUDA Math API, "Single Precision
// Intrinsics"): __fadd_rn, __fsub_rn, __fmul_rn, __fdiv_rn, __fsqrt_rn and __fmaf_rn. Each rounds its
// exact result once, and nvcc never merges an __fadd_rn, __fsub_rn or __fmul_rn into a multiply-add
// (whatever -fmad says), so an expression written with them rounds after every operation on every
// compiler; kernels that must equal the CPU backend bit for bit (adamw.cu) are written so.
// On the host, g++ contracts a product feeding a sum into an FMA across inlined functions (its default
// -ffp-contract=fast, in every C++ mode, once -march has FMA), and so does clang with -ffp-contract=fast.
// Here a product's result and a sum's operands therefore pass through an empty asm statement: the value
// stays in its register, but the optimiser no longer sees which operation made it, so there is nothing
// for it to fuse (tests/cuda/emu/test_rounded_intrinsics.cpp).
#pragma once

#include <cmath>

namespace gpt::emu {
namespace detail {

inline float unfusable(float x) {
#if defined(__x86_64__) || defined(__i386__)
  __asm__("" : "+x"(x));
#elif defined(__aarch64__)
  __asm__("" : "+w"(x));
#else
  volatile float through_memory = x;
  x = through_memory;
#endif
  return x;
}

}  // namespace detail

inline float __fmul_rn(float x, float y) { return detail::unfusable(x * y); }
inline float __fadd_rn(float x, float y) { return detail::unfusable(x) + detail::unfusable(y); }
inline float __fsub_rn(float x, float y) { return detail::unfusable(x) - detail::unfusable(y); }
inline float __fdiv_rn(float x, float y) { return x / y; }
inline float __fsqrt_rn(float x) { return std::sqrt(x); }
inline float __fmaf_rn(float x, float y, float z) { return std::fma(x, y, z); }

}  // namespace gpt::emu

using gpt::emu::__fadd_rn;
using gpt::emu::__fdiv_rn;
using gpt::emu::__fmaf_rn;
using gpt::emu::__fmul_rn;
using gpt::emu::__fsqrt_rn;
using gpt::emu::__fsub_rn;
