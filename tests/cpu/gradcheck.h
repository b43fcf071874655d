// Shared helpers for the CPU op tests: seeded random inputs held in std::vector storage, tensor views of
// that storage, relative-error comparison, and a central finite-difference driver for gradient checks
// in double precision.
#pragma once

#include "core/tensor.h"
#include "cpu/cpu_backend.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <random>
#include <vector>

namespace gpt::test {

// One CPU backend for every test (its constructor sets the OpenMP thread count process-wide).
inline cpu::CpuBackend& cpu_backend() {
  static cpu::CpuBackend backend;
  return backend;
}

// n values drawn from N(0, scale^2), never (near) zero: draws with |x| < 1e-3 * scale are redrawn.
inline std::vector<double> random_vector(size_t n, uint32_t seed, double scale = 1.0) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<double> v(n);
  for (double& x : v) {
    do x = normal(rng); while (std::abs(x) < 1e-3);
    x *= scale;
  }
  return v;
}

// n token ids uniform in [0, vocab).
inline std::vector<int32_t> random_tokens(size_t n, int32_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> uniform(0, vocab - 1);
  std::vector<int32_t> v(n);
  for (int32_t& t : v) t = uniform(rng);
  return v;
}

inline std::vector<float> to_f32(const std::vector<double>& v) { return {v.begin(), v.end()}; }
inline std::vector<double> to_f64(const std::vector<float>& v) { return {v.begin(), v.end()}; }

namespace detail {
template <class T>
Tensor make_view(std::vector<T>& storage, std::initializer_list<int64_t> dims, DType dtype) {
  Tensor t(storage.data(), dims, dtype);
  GPT_CHECK(static_cast<size_t>(t.numel()) == storage.size(), "view {} over {} elements", t.shape_string(), storage.size());
  return t;
}
}  // namespace detail

// Views of test storage; the element count must match the vector's size.
inline Tensor view(std::vector<double>& v, std::initializer_list<int64_t> dims) { return detail::make_view(v, dims, DType::F64); }
inline Tensor view(std::vector<float>& v, std::initializer_list<int64_t> dims) { return detail::make_view(v, dims, DType::F32); }
inline Tensor view(std::vector<int32_t>& v, std::initializer_list<int64_t> dims) { return detail::make_view(v, dims, DType::I32); }

// max_i |a_i - b_i| / max(|a_i|, |b_i|, floor). The floor keeps entries near zero from dominating:
// below it the comparison is absolute. Sizes must match; any NaN gives +inf.
template <class A, class B>
double max_rel_error(const std::vector<A>& a, const std::vector<B>& b, double floor = 1e-3) {
  GPT_CHECK(a.size() == b.size(), "max_rel_error: sizes {} and {} differ", a.size(), b.size());
  double worst = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double x = static_cast<double>(a[i]), y = static_cast<double>(b[i]);
    if (std::isnan(x) || std::isnan(y)) return INFINITY;
    const double denom = std::max({std::abs(x), std::abs(y), floor});
    worst = std::max(worst, std::abs(x - y) / denom);
  }
  return worst;
}

// max_i |a_i - b_i| / max_i |b_i|: the error relative to the size of the reference as a whole. This is
// the measure for finite-difference checks, whose error is absolute (about eps * |L| / h) and so swamps
// a per-element relative error wherever a gradient entry happens to be small.
template <class A>
double max_normwise_error(const std::vector<A>& a, const std::vector<double>& b) {
  GPT_CHECK(a.size() == b.size(), "max_normwise_error: sizes {} and {} differ", a.size(), b.size());
  double worst = 0.0, scale = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double x = static_cast<double>(a[i]);
    if (std::isnan(x) || std::isnan(b[i])) return INFINITY;
    worst = std::max(worst, std::abs(x - b[i]));
    scale = std::max(scale, std::abs(b[i]));
  }
  return scale > 0.0 ? worst / scale : worst;
}

// sum_i a_i * b_i: the scalar loss L = sum(out * R) of a gradient check.
template <class A>
double dot(const std::vector<A>& a, const std::vector<double>& r) {
  GPT_CHECK(a.size() == r.size(), "dot: sizes {} and {} differ", a.size(), r.size());
  double s = 0.0;
  for (size_t i = 0; i < a.size(); ++i) s += static_cast<double>(a[i]) * r[i];
  return s;
}

// Central differences dL/dx_i = (L(x + h e_i) - L(x - h e_i)) / 2h; x is perturbed in place and restored.
inline std::vector<double> numeric_gradient(std::vector<double>& x, const std::function<double()>& loss, double h = 1e-6) {
  std::vector<double> g(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double saved = x[i];
    x[i] = saved + h;
    const double plus = loss();
    x[i] = saved - h;
    const double minus = loss();
    x[i] = saved;
    g[i] = (plus - minus) / (2.0 * h);
  }
  return g;
}

}  // namespace gpt::test
