// GELU, tanh approximation, elementwise over any shape:
//   u = s (x + 0.044715 x^3) with s = sqrt(2/pi),  out = 0.5 x (1 + tanh u),
//   dgelu/dx = 0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) s (1 + 3 * 0.044715 x^2).
// Backward overwrites din = dout * dgelu(in); din may alias dout (each element is read before it is
// written). Evaluated in double for both dtypes.
#include "cpu/cpu_backend.h"
#include "cpu/dispatch.h"

#include <cmath>

namespace gpt::cpu {
namespace {

constexpr double kGeluScale = 0.7978845608028654;  // sqrt(2/pi)
constexpr double kGeluCubic = 0.044715;
// Below this many elements a parallel region costs more than it saves.
constexpr int64_t kParallelMin = 1 << 14;

template <class T>
void gelu_forward_kernel(T* out, const T* in, int64_t n) {
#pragma omp parallel for schedule(static) if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) {
    const double x = in[i];
    const double u = kGeluScale * (x + kGeluCubic * x * x * x);
    out[i] = static_cast<T>(0.5 * x * (1.0 + std::tanh(u)));
  }
}

template <class T>
void gelu_backward_kernel(T* din, const T* dout, const T* in, int64_t n) {
#pragma omp parallel for schedule(static) if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) {
    const double x = in[i];
    const double t = std::tanh(kGeluScale * (x + kGeluCubic * x * x * x));
    const double local = 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * kGeluScale * (1.0 + 3.0 * kGeluCubic * x * x);
    din[i] = static_cast<T>(local * dout[i]);
  }
}

}  // namespace

void CpuBackend::gelu_forward(const GeluForwardArgs& args) {
  GPT_CHECK(!args.out.empty() && !args.in.empty(), "gelu_forward: out and in must be given");
  GPT_CHECK(args.out.numel() == args.in.numel(), "gelu_forward: out {} should match in {}", args.out.shape_string(),
            args.in.shape_string());
  const DType dtype = common_float_dtype({&args.out, &args.in});
  dispatch_float(dtype, [&]<class T>(T) { gelu_forward_kernel(args.out.as<T>(), args.in.as<T>(), args.in.numel()); });
}

void CpuBackend::gelu_backward(const GeluBackwardArgs& args) {
  GPT_CHECK(!args.din.empty() && !args.dout.empty() && !args.in.empty(), "gelu_backward: din, dout and in must be given");
  GPT_CHECK(args.din.numel() == args.in.numel() && args.dout.numel() == args.in.numel(),
            "gelu_backward: din {} and dout {} should match in {}", args.din.shape_string(), args.dout.shape_string(),
            args.in.shape_string());
  const DType dtype = common_float_dtype({&args.din, &args.dout, &args.in});
  dispatch_float(dtype, [&]<class T>(T) {
    gelu_backward_kernel(args.din.as<T>(), args.dout.as<T>(), args.in.as<T>(), args.in.numel());
  });
}

}  // namespace gpt::cpu
