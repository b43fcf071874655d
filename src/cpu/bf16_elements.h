// BF16 elements for kernels that read and write BF16 tensors in their own loops instead of staging them
// through FP32 (wide_operands.h): the narrow recipes' activations are BF16, and staging an op's operands
// costs a pass over each of them (and, for a lookup such as the embedding's, a pass over the whole table).
// The rules are encode's and decode's (convert.h) one element at a time, branch-free so the loops
// vectorise: a kernel that computes in FP32 on these values and stores through bf16_round gives bit for
// bit what the staged kernel gives.
#pragma once

#include "core/tensor.h"
#include "precision/float_formats.h"

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <type_traits>

namespace gpt::cpu {

// A BF16 code as a kernel element type, so that templates tell it from an integer.
struct Bf16 {
  uint16_t code;
};
static_assert(sizeof(Bf16) == 2);

inline float bf16_value(Bf16 x) { return f32_from_bits(static_cast<uint32_t>(x.code) << 16); }

// Round to nearest even: BF16 is FP32's top half, so the code is (u + 0x7FFF + bit 16 of u) >> 16, the carry
// stepping into the exponent as RNE rounds up a binade (and to inf past max); NaN would carry into the
// sign, so it becomes the canonical NaN.
inline Bf16 bf16_round(float x) {
  const uint32_t u = f32_bits(x);
  const bool is_nan = (u & 0x7FFFFFFFu) > 0x7F800000u;
  return {static_cast<uint16_t>(is_nan ? Bf16Format::kCanonicalNaN : (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16)};
}

// A kernel's element read as the type it computes in: wide values as they are, BF16 decoded.
inline float widen(float x) { return x; }
inline double widen(double x) { return x; }
inline float widen(Bf16 x) { return bf16_value(x); }

// A value a kernel computed stored as element type E: a wide element takes the cast the wide kernel makes;
// a BF16 one is rounded to FP32 first (where it was computed in double), then to BF16: the staged
// kernel's FP32 result followed by encode's rounding, the same two roundings.
template <class E, class V>
inline E stored_as(V value) {
  if constexpr (std::is_same_v<E, Bf16>) {
    return bf16_round(static_cast<float>(value));
  } else {
    return static_cast<E>(value);
  }
}

// Whether every one of tensors is BF16 (a BF16 tensor never carries FP8 scaling).
inline bool all_bf16(std::initializer_list<const Tensor*> tensors) {
  return std::all_of(tensors.begin(), tensors.end(), [](const Tensor* t) { return t->dtype == DType::BF16; });
}

}  // namespace gpt::cpu
