// AdamW against the scalar formula of op_args.h, step by step, in F64 and F32.
#include "cpu/gradcheck.h"

#include <gtest/gtest.h>

#include <cmath>

namespace gpt {
namespace {

using test::cpu_backend;
using test::view;

AdamWArgs hyperparameters(int64_t step) {
  AdamWArgs a;
  a.lr = 3e-3f;
  a.beta1 = 0.9f;
  a.beta2 = 0.95f;
  a.eps = 1e-8f;
  a.weight_decay = 0.1f;
  a.grad_scale = 0.5f;
  a.step = step;
  return a;
}

template <class T>
void check_against_formula(double tolerance) {
  constexpr int64_t n = 1003;
  std::vector<double> p_ref = test::random_vector(n, 1), m_ref(n, 0.0), v_ref(n, 0.0);
  std::vector<T> params(p_ref.begin(), p_ref.end()), m(n, T(0)), v(n, T(0)), grads(n);
  for (int64_t step = 1; step <= 4; ++step) {
    const std::vector<double> g_raw = test::random_vector(n, 10 + static_cast<uint32_t>(step));
    grads.assign(g_raw.begin(), g_raw.end());
    AdamWArgs a = hyperparameters(step);
    a.params = view(params, {n});
    a.grads = view(grads, {n});
    a.m = view(m, {n});
    a.v = view(v, {n});
    cpu_backend().adamw_update(a);

    const double b1 = a.beta1, b2 = a.beta2;
    for (int64_t i = 0; i < n; ++i) {
      const double g = static_cast<double>(a.grad_scale) * static_cast<double>(static_cast<T>(g_raw[i]));
      m_ref[i] = b1 * m_ref[i] + (1 - b1) * g;
      v_ref[i] = b2 * v_ref[i] + (1 - b2) * g * g;
      const double m_hat = m_ref[i] / (1 - std::pow(b1, step));
      const double v_hat = v_ref[i] / (1 - std::pow(b2, step));
      p_ref[i] -= a.lr * (m_hat / (std::sqrt(v_hat) + a.eps) + a.weight_decay * p_ref[i]);
    }
    EXPECT_LT(test::max_rel_error(params, p_ref), tolerance) << "params, step " << step;
    EXPECT_LT(test::max_rel_error(m, m_ref), tolerance) << "m, step " << step;
    EXPECT_LT(test::max_rel_error(v, v_ref), tolerance) << "v, step " << step;
  }
}

TEST(CpuAdamW, F64MatchesScalarFormula) { check_against_formula<double>(1e-13); }

TEST(CpuAdamW, F32MatchesScalarFormula) { check_against_formula<float>(1e-5); }

TEST(CpuAdamW, RejectsStepZero) {
  std::vector<float> x(4, 1.0f), g(4, 1.0f), m(4, 0.0f), v(4, 0.0f);
  AdamWArgs a = hyperparameters(0);
  a.params = view(x, {4});
  a.grads = view(g, {4});
  a.m = view(m, {4});
  a.v = view(v, {4});
  EXPECT_THROW(cpu_backend().adamw_update(a), Error);
}

}  // namespace
}  // namespace gpt
