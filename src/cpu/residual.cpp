// Residual add with dropout on the branch, elementwise over any shape (flat index i is the dropout
// element): out = residual + keep(i) * x / (1-p). out may alias residual or x.
// Backward gives only the branch's gradient, dx = keep(i) * dout / (1-p) (the residual input's gradient
// is dout itself); dx may alias dout. Without dropout dx is a copy of dout (nothing when they alias).
// With dropout the work is split into chunks of whole Philox blocks, each walked in order with a cursor.
#include "cpu/cpu_backend.h"
#include "backend/op_checks.h"
#include "cpu/bf16_elements.h"
#include "cpu/dispatch.h"
#include "cpu/wide_operands.h"
#include "cpu/dropout.h"

#include <algorithm>
#include <cstring>

namespace gpt::cpu {
namespace {

// Below this many elements a parallel region costs more than it saves.
constexpr int64_t kParallelMin = 1 << 14;
// Elements per parallel work item when a mask is drawn (a multiple of the 4-element Philox block).
constexpr int64_t kMaskChunk = 4096;

// E: the tensors' element type, T's own or Bf16 (the narrow recipes' activations, read and written in
// place: the staged kernel's arithmetic without its passes over the three tensors).
template <class E>
void residual_add_kernel(E* out, const E* residual, const E* x, int64_t n) {
#pragma omp parallel for schedule(static) if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) out[i] = stored_as<E>(widen(residual[i]) + widen(x[i]));
}

template <class E>
void residual_forward_kernel(E* out, const E* residual, const E* x, int64_t n, const DropoutMask& mask) {
  const double scale = mask.scale();
  const int64_t chunks = (n + kMaskChunk - 1) / kMaskChunk;
#pragma omp parallel for schedule(static) if (n > kParallelMin)
  for (int64_t c = 0; c < chunks; ++c) {
    DropoutCursor cursor(mask);
    for (int64_t i = c * kMaskChunk; i < std::min(n, (c + 1) * kMaskChunk); ++i) {
      const double branch = cursor.keep(static_cast<uint64_t>(i)) ? widen(x[i]) * scale : 0.0;
      out[i] = stored_as<E>(widen(residual[i]) + branch);
    }
  }
}

template <class E>
void residual_backward_kernel(E* dx, const E* dout, int64_t n, const DropoutMask& mask) {
  const double scale = mask.scale();
  const int64_t chunks = (n + kMaskChunk - 1) / kMaskChunk;
#pragma omp parallel for schedule(static) if (n > kParallelMin)
  for (int64_t c = 0; c < chunks; ++c) {
    DropoutCursor cursor(mask);
    for (int64_t i = c * kMaskChunk; i < std::min(n, (c + 1) * kMaskChunk); ++i)
      dx[i] = cursor.keep(static_cast<uint64_t>(i)) ? stored_as<E>(widen(dout[i]) * scale) : stored_as<E>(0.0f);
  }
}

// One residual add on E elements: with the dropout mask where it is active, else the plain sum.
template <class E>
void residual_forward_elements(E* out, const E* residual, const E* x, int64_t n, const DropoutMask& mask) {
  if (mask.active()) residual_forward_kernel(out, residual, x, n, mask);
  else residual_add_kernel(out, residual, x, n);
}

}  // namespace

void CpuBackend::residual_forward(const ResidualForwardArgs& given) {
  if (all_bf16({&given.out, &given.residual, &given.x})) {
    check_residual_forward(given);
    residual_forward_elements(given.out.as<Bf16>(), given.residual.as<Bf16>(), given.x.as<Bf16>(), given.x.numel(),
                              DropoutMask(given.dropout));
    return;
  }
  WideOperands w(staging_, {&given.out, &given.residual, &given.x});
  ResidualForwardArgs args = given;
  args.residual = w.in(given.residual);
  args.x = w.in(given.x);
  args.out = w.out(given.out);
  check_residual_forward(args);
  const DropoutMask mask(args.dropout);
  dispatch_float(w.wide(), [&]<class T>(T) {
    residual_forward_elements(args.out.as<T>(), args.residual.as<T>(), args.x.as<T>(), args.x.numel(), mask);
  });
  w.store();
}

void CpuBackend::residual_backward(const ResidualBackwardArgs& given) {
  check_residual_backward(given);
  const DropoutMask mask(given.dropout);
  if (!mask.active() && given.dx.dtype == given.dout.dtype && given.dx.scaling == given.dout.scaling) {
    if (given.dx.data != given.dout.data) std::memcpy(given.dx.data, given.dout.data, given.dout.bytes());
    return;
  }
  if (all_bf16({&given.dx, &given.dout})) {
    residual_backward_kernel(given.dx.as<Bf16>(), given.dout.as<Bf16>(), given.dout.numel(), mask);
    return;
  }
  WideOperands w(staging_, {&given.dx, &given.dout});
  const Tensor dout = w.in(given.dout), dx = w.out(given.dx);
  dispatch_float(w.wide(), [&]<class T>(T) {
    if (mask.active()) residual_backward_kernel(dx.as<T>(), dout.as<T>(), dout.numel(), mask);
    else if (dx.data != dout.data) std::memcpy(dx.data, dout.data, dout.bytes());
  });
  w.store();
}

}  // namespace gpt::cpu
