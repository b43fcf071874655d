// Row-wise softmax over the last dimension D of a tensor seen as [N,D].
//   forward:  out[j] = exp(in[j] - max) / sum_k exp(in[k] - max)
//   backward: din[j] = out[j] * (dout[j] - sum_k dout[k] out[k])
// Exponentials in the tensor's precision (exp_of, vec_math.h); sums accumulate in double in lane_sum's
// fixed order. Each element is read before it is written, so out may alias in; the backward reduces a row
// before writing it, so din may alias dout or out.
#include "cpu/cpu_backend.h"
#include "backend/op_checks.h"
#include "cpu/dispatch.h"
#include "cpu/wide_operands.h"
#include "cpu/vec_math.h"

#include <algorithm>
#include <cmath>

namespace gpt::cpu {
namespace {

template <class T>
void softmax_forward_kernel(T* out, const T* in, int64_t rows, int64_t cols) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    softmax_row(out + r * cols, in + r * cols, cols);
  }
}

template <class T>
void softmax_backward_kernel(T* din, const T* dout, const T* out, int64_t rows, int64_t cols) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const T* dy = dout + r * cols;
    const T* y = out + r * cols;
    T* dx = din + r * cols;
    const T d = static_cast<T>(lane_sum(cols, [&](int64_t j) { return static_cast<double>(dy[j]) * y[j]; }));
    for (int64_t j = 0; j < cols; ++j) dx[j] = y[j] * (dy[j] - d);
  }
}

}  // namespace

void CpuBackend::softmax_forward(const SoftmaxForwardArgs& given) {
  WideOperands w(staging_, {&given.out, &given.in});
  SoftmaxForwardArgs args = given;
  args.in = w.in(given.in);
  args.out = w.out(given.out);
  const auto [rows, cols] = check_softmax_forward(args);
  dispatch_float(w.wide(), [&, rows = rows, cols = cols](auto zero) {
    using T = decltype(zero);
    softmax_forward_kernel(args.out.as<T>(), args.in.as<T>(), rows, cols);
  });
  w.store();
}

void CpuBackend::softmax_backward(const SoftmaxBackwardArgs& given) {
  WideOperands w(staging_, {&given.din, &given.dout, &given.out});
  SoftmaxBackwardArgs args = given;
  args.dout = w.in(given.dout);
  args.out = w.in(given.out);
  args.din = w.out(given.din);
  const auto [rows, cols] = check_softmax_backward(args);
  dispatch_float(w.wide(), [&, rows = rows, cols = cols](auto zero) {
    using T = decltype(zero);
    softmax_backward_kernel(args.din.as<T>(), args.dout.as<T>(), args.out.as<T>(), rows, cols);
  });
  w.store();
}

}  // namespace gpt::cpu
