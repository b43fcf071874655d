// LayerNorm: forward against a direct formula, f32 against f64 (relative 1e-5 at unit scale), and
// backward (din, dweight, dbias, all accumulating) against central finite differences in double:
// h = 1e-6, normwise relative tolerance 1e-6.
#include "cpu/gradcheck.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>

namespace gpt {
namespace {

using test::cpu_backend;
using test::max_rel_error;
using test::random_vector;
using test::view;

// in [B,T,C]; C = 75 gives two column blocks, the second partial.
struct Dims {
  int64_t b = 2, t = 5, c = 75;
  int64_t rows() const { return b * t; }
  int64_t count() const { return b * t * c; }
};

struct LayerNormData {
  explicit LayerNormData(Dims d)
      : dims(d), in(random_vector(d.count(), 1, 2.0)), weight(random_vector(d.c, 2)), bias(random_vector(d.c, 3)),
        r(random_vector(d.count(), 4)) {}
  Dims dims;
  std::vector<double> in, weight, bias;
  std::vector<double> r;  // dL/dout
};

template <class T>
struct LayerNormRun {
  std::vector<T> out, mean, rstd;
};

template <class T>
LayerNormRun<T> forward(Dims d, std::vector<T>& in, std::vector<T>& weight, std::vector<T>& bias) {
  LayerNormRun<T> run{std::vector<T>(d.count(), NAN), std::vector<T>(d.rows(), NAN), std::vector<T>(d.rows(), NAN)};
  cpu_backend().layernorm_forward({view(run.out, {d.b, d.t, d.c}), view(run.mean, {d.b, d.t}), view(run.rstd, {d.b, d.t}),
                                   view(in, {d.b, d.t, d.c}), view(weight, {d.c}), view(bias, {d.c})});
  return run;
}

template <class T>
struct LayerNormGrads {
  std::vector<T> din, dweight, dbias;
};

// Backward into buffers holding the given starting values (the op accumulates).
template <class T>
LayerNormGrads<T> backward(Dims d, std::vector<T>& in, std::vector<T>& weight, std::vector<T>& bias, std::vector<T>& dout,
                           LayerNormGrads<T> grads) {
  LayerNormRun<T> run = forward(d, in, weight, bias);
  cpu_backend().layernorm_backward({view(grads.din, {d.b, d.t, d.c}), view(grads.dweight, {d.c}), view(grads.dbias, {d.c}),
                                    view(dout, {d.b, d.t, d.c}), view(in, {d.b, d.t, d.c}), view(weight, {d.c}),
                                    view(run.mean, {d.b, d.t}), view(run.rstd, {d.b, d.t})});
  return grads;
}

template <class T>
LayerNormGrads<T> zero_grads(Dims d) {
  return {std::vector<T>(d.count()), std::vector<T>(d.c), std::vector<T>(d.c)};
}

std::vector<double> minus(const std::vector<double>& a, const std::vector<double>& b) {
  std::vector<double> c(a.size());
  for (size_t i = 0; i < a.size(); ++i) c[i] = a[i] - b[i];
  return c;
}

TEST(CpuLayerNorm, ForwardMatchesFormulaAndF32AgreesWithF64) {
  const Dims dims;
  LayerNormData d(dims);
  const LayerNormRun<double> f64 = forward(dims, d.in, d.weight, d.bias);
  const int64_t c = dims.c;
  std::vector<double> expect(dims.count());
  for (int64_t i = 0; i < dims.rows(); ++i) {
    double mean = 0.0, var = 0.0;
    for (int64_t j = 0; j < c; ++j) mean += d.in[i * c + j] / c;
    for (int64_t j = 0; j < c; ++j) var += (d.in[i * c + j] - mean) * (d.in[i * c + j] - mean) / c;
    const double rstd = 1.0 / std::sqrt(var + static_cast<double>(1e-5f));
    EXPECT_NEAR(f64.mean[i], mean, 1e-13);
    EXPECT_NEAR(f64.rstd[i], rstd, 1e-13 * rstd);
    for (int64_t j = 0; j < c; ++j) expect[i * c + j] = (d.in[i * c + j] - mean) * rstd * d.weight[j] + d.bias[j];
  }
  EXPECT_LT(max_rel_error(f64.out, expect), 1e-12);

  std::vector<float> in32 = test::to_f32(d.in), w32 = test::to_f32(d.weight), b32 = test::to_f32(d.bias);
  const LayerNormRun<float> f32 = forward(dims, in32, w32, b32);
  EXPECT_LT(max_rel_error(f32.out, f64.out, 1.0), 1e-5);
  EXPECT_LT(max_rel_error(f32.mean, f64.mean, 1.0), 1e-5);
  EXPECT_LT(max_rel_error(f32.rstd, f64.rstd, 1.0), 1e-5);
}

TEST(CpuLayerNorm, BackwardAccumulatesFiniteDifferenceGradients) {
  const Dims dims;
  LayerNormData d(dims);
  const LayerNormGrads<double> start{random_vector(dims.count(), 5), random_vector(dims.c, 6), random_vector(dims.c, 7)};
  const LayerNormGrads<double> g = backward(dims, d.in, d.weight, d.bias, d.r, start);

  auto loss = [&] { return test::dot(forward(dims, d.in, d.weight, d.bias).out, d.r); };
  EXPECT_LT(test::max_normwise_error(minus(g.din, start.din), test::numeric_gradient(d.in, loss)), 1e-6);
  EXPECT_LT(test::max_normwise_error(minus(g.dweight, start.dweight), test::numeric_gradient(d.weight, loss)), 1e-6);
  EXPECT_LT(test::max_normwise_error(minus(g.dbias, start.dbias), test::numeric_gradient(d.bias, loss)), 1e-6);
}

// Large enough that the kernels run their parallel regions.
TEST(CpuLayerNorm, BackwardF32AgreesWithF64AndIsThreadCountIndependent) {
  const Dims dims{4, 64, 200};
  LayerNormData d(dims);
  const LayerNormGrads<double> g64 = backward(dims, d.in, d.weight, d.bias, d.r, zero_grads<double>(dims));

  std::vector<float> in = test::to_f32(d.in), w = test::to_f32(d.weight), b = test::to_f32(d.bias), r = test::to_f32(d.r);
  auto run32 = [&](int threads) {
    const int saved = omp_get_max_threads();
    omp_set_num_threads(threads);
    LayerNormGrads<float> g = backward(dims, in, w, b, r, zero_grads<float>(dims));
    omp_set_num_threads(saved);
    return g;
  };
  const LayerNormGrads<float> one = run32(1), three = run32(3);
  EXPECT_EQ(one.din, three.din);
  EXPECT_EQ(one.dweight, three.dweight);
  EXPECT_EQ(one.dbias, three.dbias);
  EXPECT_LT(max_rel_error(one.din, g64.din, 1.0), 1e-5);
  // dweight and dbias sum 256 rows: compare at the scale of that sum.
  EXPECT_LT(max_rel_error(one.dweight, g64.dweight, 16.0), 1e-5);
  EXPECT_LT(max_rel_error(one.dbias, g64.dbias, 16.0), 1e-5);
}

TEST(CpuLayerNorm, RejectsMismatchedShapes) {
  const Dims dims;
  LayerNormData d(dims);
  std::vector<double> out(dims.count()), mean(dims.rows()), rstd(dims.rows());
  std::vector<double> short_weight(dims.c - 1);
  EXPECT_THROW(cpu_backend().layernorm_forward({view(out, {dims.rows(), dims.c}), view(mean, {dims.rows()}),
                                                view(rstd, {dims.rows()}), view(d.in, {dims.rows(), dims.c}),
                                                view(short_weight, {dims.c - 1}), view(d.bias, {dims.c})}),
               Error);
}

}  // namespace
}  // namespace gpt
