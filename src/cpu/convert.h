// Element conversions between the wide formats the CPU kernels compute in (F32, F64) and every storage
// format a tensor may have (F32, F64, BF16, F16, E4M3, E5M2), through the exact scalar rules of
// precision/float_formats.h, so they are the reference the CUDA conversions must match bit for bit.
//
// encode: code = convert(x * scale) in one round-to-nearest-even, x * scale one multiply in x's precision.
// A code that overflowed (magnitude kMaxCode + 1, x * scale not NaN) is counted and, with saturation (FP8
// only), replaced by +-max, which is what convert(v, satfinite) gives; an underflow is x != 0 stored as +-0.
// The amax is over the unscaled x, as Transformer Engine records it. Threads split the elements
// statically; counts and maxima reduce exactly, in any order.
// decode: value = decode(code) * scale_inv, exact before the multiply.
#pragma once

#include "core/tensor.h"
#include "precision/float_formats.h"

#include <cstdint>

namespace gpt::cpu {

// What one encoding pass saw.
struct QuantStats {
  int64_t underflow = 0;
  int64_t overflow = 0;
  double amax = 0.0;
  bool nan = false;
};

bool is_wide_float(DType t);

// One switch from a narrow dtype to its format traits.
template <class Fn>
void dispatch_format(DType dtype, Fn&& fn) {
  if (!visit_float_format(dtype, fn)) GPT_FAIL("{} is not a narrow float format (bf16, f16, e4m3, e5m2)", dtype_name(dtype));
}

// The code of x * scale, counting an underflow or an overflow (saturated to +-max when saturate).
template <class Fmt, class T>
typename Fmt::Storage encode_one(T x, T scale, bool saturate, int64_t& underflow, int64_t& overflow) {
  using Storage = typename Fmt::Storage;
  const T v = x * scale;
  Storage code = Fmt::encode(v, false);
  const Storage magnitude = static_cast<Storage>(code & ~Fmt::kSignMask);
  if (magnitude == Fmt::kMaxCode + 1 && !(v != v)) {
    ++overflow;
    if (saturate) code = static_cast<Storage>((code & Fmt::kSignMask) | Fmt::kMaxCode);
  } else if (magnitude == 0 && x != T(0)) {
    ++underflow;
  }
  return code;
}

// out (any float dtype, n elements) = in[0, n) (F32 or F64, of type T) encoded with scale; saturate
// applies to FP8 outputs only (BF16 and F16 overflow to inf like IEEE). For a wide out, scale must be 1
// and the conversion is a plain rounding to out's precision.
template <class T>
QuantStats encode(const T* in, const Tensor& out, int64_t n, T scale, bool saturate);
// out[0, n) (of type T) = the values of in (any float dtype) times scale_inv.
template <class T>
void decode(const Tensor& in, T* out, int64_t n, T scale_inv);

// Adds a pass's statistics to an FP8 tensor's scaling state (amax NaN once any input was).
void add_stats(Fp8Meta& meta, const QuantStats& stats);

}  // namespace gpt::cpu
