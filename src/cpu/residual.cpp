// Residual add with dropout on the branch, elementwise over any shape (flat index i is the dropout
// element): out = residual + keep(i) * x / (1-p). out may alias residual or x.
// Backward gives only the branch's gradient, dx = keep(i) * dout / (1-p) (the residual input's gradient
// is dout itself); dx may alias dout. Without dropout dx is a copy of dout (nothing when they alias).
// With dropout the work is split into chunks of whole Philox blocks, each walked in order with a cursor.
#include "cpu/cpu_backend.h"
#include "cpu/dispatch.h"
#include "cpu/dropout.h"

#include <algorithm>
#include <cstring>

namespace gpt::cpu {
namespace {

// Below this many elements a parallel region costs more than it saves.
constexpr int64_t kParallelMin = 1 << 14;
// Elements per parallel work item when a mask is drawn (a multiple of the 4-element Philox block).
constexpr int64_t kMaskChunk = 4096;

template <class T>
void residual_add_kernel(T* out, const T* residual, const T* x, int64_t n) {
#pragma omp parallel for schedule(static) if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) out[i] = residual[i] + x[i];
}

template <class T>
void residual_forward_kernel(T* out, const T* residual, const T* x, int64_t n, const DropoutMask& mask) {
  const double scale = mask.scale();
  const int64_t chunks = (n + kMaskChunk - 1) / kMaskChunk;
#pragma omp parallel for schedule(static) if (n > kParallelMin)
  for (int64_t c = 0; c < chunks; ++c) {
    DropoutCursor cursor(mask);
    for (int64_t i = c * kMaskChunk; i < std::min(n, (c + 1) * kMaskChunk); ++i) {
      const double branch = cursor.keep(static_cast<uint64_t>(i)) ? x[i] * scale : 0.0;
      out[i] = static_cast<T>(residual[i] + branch);
    }
  }
}

template <class T>
void residual_backward_kernel(T* dx, const T* dout, int64_t n, const DropoutMask& mask) {
  const double scale = mask.scale();
  const int64_t chunks = (n + kMaskChunk - 1) / kMaskChunk;
#pragma omp parallel for schedule(static) if (n > kParallelMin)
  for (int64_t c = 0; c < chunks; ++c) {
    DropoutCursor cursor(mask);
    for (int64_t i = c * kMaskChunk; i < std::min(n, (c + 1) * kMaskChunk); ++i)
      dx[i] = cursor.keep(static_cast<uint64_t>(i)) ? static_cast<T>(dout[i] * scale) : T(0);
  }
}

}  // namespace

void CpuBackend::residual_forward(const ResidualForwardArgs& args) {
  GPT_CHECK(!args.out.empty() && !args.residual.empty() && !args.x.empty(), "residual_forward: out, residual and x must be given");
  GPT_CHECK(args.out.numel() == args.x.numel() && args.residual.numel() == args.x.numel(),
            "residual_forward: out {}, residual {} and x {} should have one element count", args.out.shape_string(),
            args.residual.shape_string(), args.x.shape_string());
  const DType dtype = common_float_dtype({&args.out, &args.residual, &args.x});
  const DropoutMask mask(args.dropout);
  dispatch_float(dtype, [&]<class T>(T) {
    if (mask.active()) {
      residual_forward_kernel(args.out.as<T>(), args.residual.as<T>(), args.x.as<T>(), args.x.numel(), mask);
    } else {
      residual_add_kernel(args.out.as<T>(), args.residual.as<T>(), args.x.as<T>(), args.x.numel());
    }
  });
}

void CpuBackend::residual_backward(const ResidualBackwardArgs& args) {
  GPT_CHECK(!args.dx.empty() && !args.dout.empty(), "residual_backward: dx and dout must be given");
  GPT_CHECK(args.dx.numel() == args.dout.numel(), "residual_backward: dx {} should match dout {}", args.dx.shape_string(),
            args.dout.shape_string());
  const DType dtype = common_float_dtype({&args.dx, &args.dout});
  const DropoutMask mask(args.dropout);
  if (!mask.active()) {
    if (args.dx.data != args.dout.data) std::memcpy(args.dx.data, args.dout.data, args.dout.bytes());
    return;
  }
  dispatch_float(dtype, [&]<class T>(T) { residual_backward_kernel(args.dx.as<T>(), args.dout.as<T>(), args.dout.numel(), mask); });
}

}  // namespace gpt::cpu
