// AdamW against the scalar formula of op_args.h, step by step, in F64 and F32; and bit for bit against
// the order of roundings src/cpu/adamw.cpp documents (which cuda/kernels/adamw.cu follows), with every
// rounding forced, so a multiply-add the compiler contracted in the vector body or the scalar tail fails.
#include "cpu/gradcheck.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>

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

// One AdamW step of the CPU backend over the four vectors, with the file's hyperparameters; returns its args.
template <class T>
AdamWArgs update_in_place(std::vector<T>& params, std::vector<T>& grads, std::vector<T>& m, std::vector<T>& v,
                          int64_t step) {
  const int64_t n = static_cast<int64_t>(params.size());
  AdamWArgs a = hyperparameters(step);
  a.params = view(params, {n});
  a.grads = view(grads, {n});
  a.m = view(m, {n});
  a.v = view(v, {n});
  cpu_backend().adamw_update(a);
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
    const AdamWArgs a = update_in_place(params, grads, m, v, step);

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

// A copy of x the compiler cannot see through, so no FMA spans it: each product below rounds on its own.
template <class T>
T rounded(T x) {
  volatile T opaque = x;
  return opaque;
}

template <class T>
void reference_update(T& param, T grad, T& m, T& v, const AdamWArgs& a) {
  const T b1 = a.beta1, b2 = a.beta2, one_minus_b1 = T(1) - b1, one_minus_b2 = T(1) - b2;
  const T c1 = static_cast<T>(1.0 / (1.0 - std::pow(static_cast<double>(a.beta1), static_cast<double>(a.step))));
  const T c2 = static_cast<T>(1.0 / (1.0 - std::pow(static_cast<double>(a.beta2), static_cast<double>(a.step))));
  const T g = rounded(static_cast<T>(a.grad_scale) * grad);
  m = std::fma(b1, m, rounded(one_minus_b1 * g));
  v = std::fma(b2, v, rounded(rounded(one_minus_b2 * g) * g));
  const T m_hat = rounded(m * c1), v_hat = rounded(v * c2);
  const T update = std::fma(static_cast<T>(a.weight_decay), param, m_hat / (std::sqrt(v_hat) + static_cast<T>(a.eps)));
  param = std::fma(-static_cast<T>(a.lr), update, param);
}

template <class T>
void check_bitwise_against_reference() {
  constexpr int64_t n = 1003;  // 62 vectors of 16 floats (AVX-512) and a scalar tail of 11
  const std::vector<double> p0 = test::random_vector(n, 3), m0 = test::random_vector(n, 4, 1e-2),
                            v0 = test::random_vector(n, 5, 1e-3);
  std::vector<T> params(p0.begin(), p0.end()), m(m0.begin(), m0.end()), v(n), grads(n);
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<T>(std::fabs(v0[i]));
  std::vector<T> p_ref = params, m_ref = m, v_ref = v;
  for (int64_t step = 1; step <= 4; ++step) {
    const std::vector<double> g_raw = test::random_vector(n, 20 + static_cast<uint32_t>(step));
    grads.assign(g_raw.begin(), g_raw.end());
    const AdamWArgs a = update_in_place(params, grads, m, v, step);
    int mismatches = 0;
    for (int64_t i = 0; i < n; ++i) {
      reference_update(p_ref[i], grads[i], m_ref[i], v_ref[i], a);
      const bool same = params[i] == p_ref[i] && m[i] == m_ref[i] && v[i] == v_ref[i];
      if (!same && mismatches++ < 5)
        ADD_FAILURE() << "step " << step << " element " << i << ": param " << params[i] << " vs " << p_ref[i] << ", m "
                      << m[i] << " vs " << m_ref[i] << ", v " << v[i] << " vs " << v_ref[i];
    }
    EXPECT_EQ(mismatches, 0) << "step " << step;
  }
}

TEST(CpuAdamW, F32RoundsInTheDocumentedOrderBitForBit) { check_bitwise_against_reference<float>(); }

TEST(CpuAdamW, F64RoundsInTheDocumentedOrderBitForBit) { check_bitwise_against_reference<double>(); }

TEST(CpuAdamW, F64MatchesScalarFormula) { check_against_formula<double>(1e-13); }

TEST(CpuAdamW, F32MatchesScalarFormula) { check_against_formula<float>(1e-5); }

// The update that writes the compute copy too gives the masters and moments of the plain update, and the
// copy a cast of them gives, in every element: the vector body, the chunks, the tail, the threads' split
// (40003 elements run in parallel), and a master past F16's range (inf in an F16 copy, as the cast has it).
TEST(CpuAdamW, TheComputeCopyItWritesIsTheCastOfTheUpdatedMasters) {
  for (const DType format : {DType::BF16, DType::F16}) {
    for (const int64_t n : {int64_t{1003}, int64_t{40003}}) {
      const std::vector<double> p0 = test::random_vector(n, 6), g0 = test::random_vector(n, 7);
      std::vector<float> fused(p0.begin(), p0.end()), grads(g0.begin(), g0.end()), m(n, 0.0f), v(n, 0.0f);
      fused[5] = 7.0e4f;
      std::vector<float> plain = fused, m_plain = m, v_plain = v;
      std::vector<uint16_t> copy(n, 0xFFFF), cast(n, 0);
      for (int64_t step = 1; step <= 2; ++step) {
        AdamWArgs a = hyperparameters(step);
        a.grads = view(grads, {n});
        a.params = view(fused, {n});
        a.m = view(m, {n});
        a.v = view(v, {n});
        a.compute = Tensor(copy.data(), {n}, format);
        cpu_backend().adamw_update(a);
        update_in_place(plain, grads, m_plain, v_plain, step);
      }
      cpu_backend().cast({Tensor(cast.data(), {n}, format), view(plain, {n})});
      int mismatches = 0;
      for (int64_t i = 0; i < n; ++i)
        if ((fused[i] != plain[i] || m[i] != m_plain[i] || v[i] != v_plain[i] || copy[i] != cast[i]) && mismatches++ < 5)
          ADD_FAILURE() << dtype_name(format) << " n " << n << " element " << i << ": master " << fused[i] << " vs "
                        << plain[i] << ", copy code " << copy[i] << " vs the cast's " << cast[i];
      EXPECT_EQ(mismatches, 0) << dtype_name(format) << " n " << n;
    }
  }
}

TEST(CpuAdamW, RefusesAComputeCopyItCannotWrite) {
  std::vector<float> x(4, 1.0f), g(4, 1.0f), m(4, 0.0f), v(4, 0.0f);
  std::vector<uint16_t> copy(4);
  AdamWArgs a = hyperparameters(1);
  a.params = view(x, {4});
  a.grads = view(g, {4});
  a.m = view(m, {4});
  a.v = view(v, {4});
  a.compute = Tensor(copy.data(), {3}, DType::BF16);
  EXPECT_THROW(cpu_backend().adamw_update(a), Error);
  a.compute = Tensor(copy.data(), {4}, DType::E4M3);
  try {
    cpu_backend().adamw_update(a);
    ADD_FAILURE() << "an E4M3 compute copy was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("e4m3"), std::string::npos) << e.what();
  }
}

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
