// Elementwise math and reductions written so that the compiler vectorises the loops around them.
//
// exp_f32: e^x in FP32 without branches or table lookups. x = n ln2 + r with n = round(x / ln2) and
// |r| <= ln2/2 (Cody–Waite: ln2 split in a short head, so n * head is exact, and a tail); e^r from
// Cephes' expf polynomial; 2^n applied as two power-of-two factors, so results in the subnormal range
// round once and n never leaves the normal exponent range. Within 2 ulp of the exact value everywhere
// (tests/backend/test_cpu_vector_math.cpp checks it), the accuracy class of CUDA's expf; underflows to
// +0 below about -103.97, overflows to +inf above 88.72, NaN stays NaN. glibc's expf is a scalar call,
// which keeps every loop that contains it scalar; this is about 15x faster per element on AVX-512.
//
// lane_sum: sum of f(i) for i in [0, n) in double, with kLanes partial sums (lane j takes the indices
// i = j mod kLanes) added in a fixed tree at the end. The order depends on n only, never on threads or
// the vector width, so results are bitwise reproducible, and the lanes are independent, so the loops
// vectorise; a single double accumulator is a chain of dependent adds at one element per 4 cycles.
#pragma once

#include "cpu/bf16_elements.h"

#include <bit>
#include <cmath>
#include <cstdint>
#include <type_traits>

namespace gpt::cpu {

inline float exp_f32(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693359375f;       // 355/512: n * kLn2Hi is exact for |n| < 2^15
  constexpr float kLn2Lo = -2.12194440e-4f;    // ln2 - kLn2Hi
  constexpr float kRound = 12582912.0f;        // 1.5 * 2^23: adding it rounds to an integer
  constexpr uint32_t kRoundBits = 0x4B400000u; // its bit pattern; t's low bits then hold n
  x = x < -104.0f ? -104.0f : x;  // comparisons written so that NaN passes through
  x = x > 89.0f ? 89.0f : x;
  const float t = x * kLog2e + kRound;
  const float n = t - kRound;
  const auto ni = static_cast<int32_t>(std::bit_cast<uint32_t>(t) - kRoundBits);
  float r = x - n * kLn2Hi;
  r = r - n * kLn2Lo;
  const float r2 = r * r;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float er = p * r2 + r + 1.0f;
  const int32_t h = ni >> 1;
  const float s1 = std::bit_cast<float>(static_cast<uint32_t>(h + 127) << 23);
  const float s2 = std::bit_cast<float>(static_cast<uint32_t>(ni - h + 127) << 23);
  return er * s1 * s2;
}

// e^x in the kernel's precision: exp_f32 for FP32, the C library's for the FP64 reference runs.
template <class T>
inline T exp_of(T x) {
  if constexpr (std::is_same_v<T, float>) {
    return exp_f32(x);
  } else {
    return std::exp(x);
  }
}

constexpr int kLanes = 8;
// Terms are computed a chunk at a time into a stack buffer, in a plain loop that vectorises whatever the
// term is, then added into the lanes; a multiple of kLanes, so lane = i mod kLanes holds across chunks.
constexpr int kLaneChunk = 256;

namespace detail {

template <class R>
inline void add_to_lanes(double (&acc)[kLanes], const R* terms, int len) {
  int j = 0;
  for (; j + kLanes <= len; j += kLanes) {
    for (int l = 0; l < kLanes; ++l) acc[l] += static_cast<double>(terms[j + l]);
  }
  for (int l = 0; j + l < len; ++l) acc[l] += static_cast<double>(terms[j + l]);
}

inline double combine_lanes(const double (&acc)[kLanes]) {
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

}  // namespace detail

// The terms are buffered in the type term returns (a float buffer keeps an FP32 term loop free of
// conversions, which GCC 12 does not vectorise together with exp_f32's selects) and widened as they are
// added.
template <class F>
inline double lane_sum(int64_t n, F&& term) {
  using R = std::decay_t<decltype(term(int64_t{0}))>;
  double acc[kLanes] = {};
  R terms[kLaneChunk];
  for (int64_t base = 0; base < n; base += kLaneChunk) {
    const int len = static_cast<int>(n - base < kLaneChunk ? n - base : kLaneChunk);
    for (int j = 0; j < len; ++j) terms[j] = term(base + j);
    detail::add_to_lanes(acc, terms, len);
  }
  return detail::combine_lanes(acc);
}

// Two sums in one pass over the data, each in lane_sum's order: terms(i, a, b) sets both terms of i.
template <class F>
inline void lane_sum2(int64_t n, F&& terms, double& sum_a, double& sum_b) {
  double acc_a[kLanes] = {}, acc_b[kLanes] = {};
  double a[kLaneChunk], b[kLaneChunk];
  for (int64_t base = 0; base < n; base += kLaneChunk) {
    const int len = static_cast<int>(n - base < kLaneChunk ? n - base : kLaneChunk);
    for (int j = 0; j < len; ++j) terms(base + j, a[j], b[j]);
    detail::add_to_lanes(acc_a, a, len);
    detail::add_to_lanes(acc_b, b, len);
  }
  sum_a = detail::combine_lanes(acc_a);
  sum_b = detail::combine_lanes(acc_b);
}

// max_i x[i] for n >= 1, in the type the elements widen to (a BF16 element's FP32 value). Exact in any
// order, so the compiler may split it across vector lanes.
template <class E>
inline auto lane_max(const E* x, int64_t n) {
  auto m = widen(x[0]);
#pragma omp simd reduction(max : m)
  for (int64_t i = 0; i < n; ++i) m = widen(x[i]) > m ? widen(x[i]) : m;
  return m;
}

// y[0..n) = softmax(x[0..n)) for n >= 1, the sum in lane_sum's order; y may be x (in place).
template <class T>
inline void softmax_row(T* y, const T* x, int64_t n) {
  const T max_val = lane_max(x, n);
  const double sum = lane_sum(n, [&](int64_t j) {
    const T e = exp_of(x[j] - max_val);
    y[j] = e;
    return e;
  });
  const T inv = static_cast<T>(1.0 / sum);
  for (int64_t j = 0; j < n; ++j) y[j] *= inv;
}

}  // namespace gpt::cpu
