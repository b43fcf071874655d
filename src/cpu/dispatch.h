// One switch from a tensor's runtime dtype to the scalar type a CPU kernel template is instantiated
// with. F32 is what training runs; F64 runs the same kernels for double-precision gradient checks.
#pragma once

#include "core/tensor.h"

#include <initializer_list>

namespace gpt::cpu {

template <class Fn>
void dispatch_float(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::F32: fn(float{}); return;
    case DType::F64: fn(double{}); return;
    default: GPT_FAIL("the cpu backend has no kernel for dtype {}", dtype_name(dtype));
  }
}

// Every non-empty tensor of an op's floating-point operands must share one dtype.
inline DType common_float_dtype(std::initializer_list<const Tensor*> tensors) {
  const Tensor* first = nullptr;
  for (const Tensor* t : tensors) {
    if (t->empty()) continue;
    if (!first) first = t;
    GPT_CHECK(t->dtype == first->dtype, "mixed dtypes in one op: {} and {}", dtype_name(first->dtype), dtype_name(t->dtype));
  }
  GPT_CHECK(first != nullptr, "op called without tensors");
  return first->dtype;
}

// Accumulator for reductions: never narrower than double on the CPU reference.
template <class T>
using Accum = double;

}  // namespace gpt::cpu
