// AdamW with decoupled weight decay (Loshchilov & Hutter), bias-corrected, elementwise:
//   g = grad_scale * grad;  m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2
//   param -= lr * (m / (1-b1^step) / (sqrt(v / (1-b2^step)) + eps) + weight_decay * param)
// params, grads, m and v share one dtype; the bias corrections are computed once in double.
#include "cpu/cpu_backend.h"
#include "cpu/dispatch.h"

#include <cmath>

namespace gpt::cpu {
namespace {

template <class T>
void adamw_kernel(T* params, const T* grads, T* m, T* v, int64_t n, const AdamWArgs& a) {
  const T lr = static_cast<T>(a.lr);
  const T beta1 = static_cast<T>(a.beta1);
  const T beta2 = static_cast<T>(a.beta2);
  const T eps = static_cast<T>(a.eps);
  const T weight_decay = static_cast<T>(a.weight_decay);
  const T grad_scale = static_cast<T>(a.grad_scale);
  const double step = static_cast<double>(a.step);
  const T inv_correction1 = static_cast<T>(1.0 / (1.0 - std::pow(static_cast<double>(a.beta1), step)));
  const T inv_correction2 = static_cast<T>(1.0 / (1.0 - std::pow(static_cast<double>(a.beta2), step)));
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const T g = grad_scale * grads[i];
    const T mi = beta1 * m[i] + (T(1) - beta1) * g;
    const T vi = beta2 * v[i] + (T(1) - beta2) * g * g;
    m[i] = mi;
    v[i] = vi;
    const T m_hat = mi * inv_correction1;
    const T v_hat = vi * inv_correction2;
    params[i] -= lr * (m_hat / (std::sqrt(v_hat) + eps) + weight_decay * params[i]);
  }
}

}  // namespace

void CpuBackend::adamw_update(const AdamWArgs& args) {
  const int64_t n = args.params.numel();
  GPT_CHECK(!args.params.empty() && !args.grads.empty() && !args.m.empty() && !args.v.empty(),
            "adamw_update: params, grads, m and v are required");
  GPT_CHECK(args.grads.numel() == n && args.m.numel() == n && args.v.numel() == n,
            "adamw_update: element counts differ: params {}, grads {}, m {}, v {}", n, args.grads.numel(),
            args.m.numel(), args.v.numel());
  GPT_CHECK(args.step >= 1, "adamw_update: step must be >= 1, got {}", args.step);
  dispatch_float(common_float_dtype({&args.params, &args.grads, &args.m, &args.v}), [&](auto zero) {
    using T = decltype(zero);
    adamw_kernel(args.params.as<T>(), args.grads.as<T>(), args.m.as<T>(), args.v.as<T>(), n, args);
  });
}

}  // namespace gpt::cpu
