// The staging a matrix product needs on a backend whose products take FP8 operands only as cuBLASLt does
// (BackendCapabilities::stages_fp8_operands): FP8 x FP8 in the TN layout alone (both operands with K
// contiguous), so an operand stored the other way is first transposed; BF16/F16 x FP8 not at all, so the
// FP8 codes are first widened to the 16-bit format. Those copies live in MatmulArgs::staging, a buffer of
// the activation plan. This is the one rule for both sides: the plan sizes the buffer for the model's
// largest product with it, and the backend carves each product's copies with it, so the bytes a product
// uses are the bytes that were planned.
#pragma once

#include "core/arena.h"
#include "core/dtype.h"

#include <cstddef>
#include <cstdint>

namespace gpt {

// A product out[M,N] = op(a) op(b) with op(a) [M,K] and op(b) [K,N], MatmulArgs' meaning of the transposes.
struct ProductShape {
  DType a = DType::F32, b = DType::F32;
  int64_t m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false;
};

// Where a product's staged copies start in the staging buffer (kNotStaged: the operand is used in place)
// and how many bytes the buffer needs for them. Copies start at ArenaLayout's alignment.
struct MatmulStaging {
  static constexpr size_t kNotStaged = ~size_t{0};
  size_t a = kNotStaged, b = kNotStaged;
  size_t bytes = 0;
};

inline bool is_fp8_format(DType t) { return t == DType::E4M3 || t == DType::E5M2; }

// The K an FP8 x FP8 product reaches cuBLASLt with: where both operands are copied (trans_a and not
// trans_b: a weight gradient dy^T x, whose K is the batch's rows), the copies' rows are padded with zero
// codes to the multiple of 16 cuBLASLt's FP8 products take; elsewhere K as it is.
inline int64_t fp8_product_k(int64_t k, bool trans_a, bool trans_b) {
  return trans_a && !trans_b ? (k + 15) / 16 * 16 : k;
}

inline MatmulStaging matmul_staging(const ProductShape& p) {
  MatmulStaging s;
  const auto take = [&](size_t& at, size_t bytes) {
    at = ArenaLayout::aligned(s.bytes);
    s.bytes = at + bytes;
  };
  const auto elements = [](int64_t rows, int64_t cols) { return static_cast<size_t>(rows) * static_cast<size_t>(cols); };
  const bool fp8_a = is_fp8_format(p.a), fp8_b = is_fp8_format(p.b);
  if (fp8_a && fp8_b) {
    // TN: a as stored [M,K], b as stored [N,K] (trans_b); the transposed copies hold one byte an element,
    // K padded where both are copied.
    const int64_t k = fp8_product_k(p.k, p.trans_a, p.trans_b);
    if (p.trans_a) take(s.a, elements(p.m, k));
    if (!p.trans_b) take(s.b, elements(p.n, k));
  } else if (fp8_a && (p.b == DType::BF16 || p.b == DType::F16)) {
    take(s.a, elements(p.m, p.k) * dtype_size(p.b));
  } else if (fp8_b && (p.a == DType::BF16 || p.a == DType::F16)) {
    take(s.b, elements(p.k, p.n) * dtype_size(p.a));
  }
  return s;
}

}  // namespace gpt
