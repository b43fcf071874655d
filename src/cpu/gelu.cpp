// GELU, tanh approximation, elementwise over any shape:
//   u = s (x + 0.044715 x^3) with s = sqrt(2/pi),  out = 0.5 x (1 + tanh u),
//   dgelu/dx = 0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) s (1 + 3 * 0.044715 x^2).
// FP64, the reference of the gradient checks, evaluates these formulas as written. FP32 uses the
// logistic form of the same function: with e = exp(-2u) and sig = 1 / (1 + e),
//   0.5 (1 + tanh u) = sig,  1 - tanh^2 u = 4 sig (1 - sig) = 4 e sig^2,
// so out = x / (1 + e) and dgelu/dx = sig + 2 x s (1 + 3 * 0.044715 x^2) e sig^2: one exp_f32 per element
// (vec_math.h), so the loops vectorise (tanh is a scalar libm call), and no cancellation where
// 1 + tanh u is small.
// Backward overwrites din = dout * dgelu(in); din may alias dout (each element is read before it is
// written).
#include "cpu/cpu_backend.h"
#include "backend/op_checks.h"
#include "cpu/bf16_elements.h"
#include "cpu/dispatch.h"
#include "cpu/wide_operands.h"
#include "cpu/vec_math.h"

#include <algorithm>
#include <cmath>

namespace gpt::cpu {
namespace {

constexpr double kGeluScale = 0.7978845608028654;  // sqrt(2/pi)
constexpr double kGeluCubic = 0.044715;
// Below this many elements a parallel region costs more than it saves.
constexpr int64_t kParallelMin = 1 << 14;

// Largest -2u the FP32 backward exponentiates: e stays finite, so e * sig^2 never becomes inf * 0.
// Beyond it the true derivative is below 1e-37.
constexpr float kExpCap = 88.0f;

inline float gelu(float x) {
  const float s = static_cast<float>(kGeluScale), c = static_cast<float>(kGeluCubic);
  const float u = s * (x + c * x * x * x);
  return x / (1.0f + exp_f32(-2.0f * u));
}

inline double gelu(double x) {
  const double u = kGeluScale * (x + kGeluCubic * x * x * x);
  return 0.5 * x * (1.0 + std::tanh(u));
}

inline float gelu_grad(float x) {
  const float s = static_cast<float>(kGeluScale), c = static_cast<float>(kGeluCubic);
  const float x2 = x * x;
  const float u = s * (x + c * x2 * x);
  const float e = exp_f32(std::min(-2.0f * u, kExpCap));
  const float sig = 1.0f / (1.0f + e);
  return sig + 2.0f * x * s * (1.0f + 3.0f * c * x2) * (e * sig) * sig;
}

inline double gelu_grad(double x) {
  const double t = std::tanh(kGeluScale * (x + kGeluCubic * x * x * x));
  return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * kGeluScale * (1.0 + 3.0 * kGeluCubic * x * x);
}

template <class T>
void gelu_forward_kernel(T* out, const T* in, int64_t n) {
#pragma omp parallel for schedule(static) if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) out[i] = gelu(in[i]);
}

template <class T>
void gelu_backward_kernel(T* din, const T* dout, const T* in, int64_t n) {
#pragma omp parallel for schedule(static) if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) din[i] = gelu_grad(in[i]) * dout[i];
}

// Every tensor BF16 (the narrow recipes' MLP activations): decoded, computed in FP32 and rounded in one
// loop, the staged kernel's arithmetic without its three extra passes over memory.
void gelu_forward_bf16(Bf16* out, const Bf16* in, int64_t n) {
#pragma omp parallel for schedule(static) if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) out[i] = bf16_round(gelu(bf16_value(in[i])));
}

void gelu_backward_bf16(Bf16* din, const Bf16* dout, const Bf16* in, int64_t n) {
#pragma omp parallel for schedule(static) if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) din[i] = bf16_round(gelu_grad(bf16_value(in[i])) * bf16_value(dout[i]));
}

}  // namespace

void CpuBackend::gelu_forward(const GeluForwardArgs& given) {
  if (all_bf16({&given.out, &given.in})) {
    check_gelu_forward(given);
    gelu_forward_bf16(given.out.as<Bf16>(), given.in.as<Bf16>(), given.in.numel());
    return;
  }
  WideOperands w(staging_, {&given.out, &given.in});
  GeluForwardArgs args = given;
  args.in = w.in(given.in);
  args.out = w.out(given.out);
  check_gelu_forward(args);
  dispatch_float(w.wide(), [&]<class T>(T) { gelu_forward_kernel(args.out.as<T>(), args.in.as<T>(), args.in.numel()); });
  w.store();
}

void CpuBackend::gelu_backward(const GeluBackwardArgs& given) {
  if (all_bf16({&given.din, &given.dout, &given.in})) {
    check_gelu_backward(given);
    gelu_backward_bf16(given.din.as<Bf16>(), given.dout.as<Bf16>(), given.in.as<Bf16>(), given.in.numel());
    return;
  }
  WideOperands w(staging_, {&given.din, &given.dout, &given.in});
  GeluBackwardArgs args = given;
  args.dout = w.in(given.dout);
  args.in = w.in(given.in);
  args.din = w.out(given.din);
  check_gelu_backward(args);
  dispatch_float(w.wide(), [&]<class T>(T) {
    gelu_backward_kernel(args.din.as<T>(), args.dout.as<T>(), args.in.as<T>(), args.in.numel());
  });
  w.store();
}

}  // namespace gpt::cpu
