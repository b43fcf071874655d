// matmul against a naive triple loop (all trans flags, alpha, beta, bias; f32 and f64; many rows and one),
// and the three products of a linear layer's backward checked against central finite differences in double.
#include "cpu/gradcheck.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <utility>

namespace gpt {
namespace {

using test::cpu_backend;
using test::max_rel_error;
using test::random_vector;
using test::view;

// alpha * op(a) op(b) + beta * out0 + bias, in double.
std::vector<double> naive_matmul(const std::vector<double>& a, const std::vector<double>& b, const std::vector<double>* bias,
                                 const std::vector<double>& out0, int64_t m, int64_t n, int64_t k, bool trans_a, bool trans_b,
                                 double alpha, double beta) {
  std::vector<double> out(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double s = 0.0;
      for (int64_t p = 0; p < k; ++p) {
        const double av = trans_a ? a[p * m + i] : a[i * k + p];
        const double bv = trans_b ? b[j * k + p] : b[p * n + j];
        s += av * bv;
      }
      out[i * n + j] = alpha * s + (beta != 0.0 ? beta * out0[i * n + j] : 0.0) + (bias ? (*bias)[j] : 0.0);
    }
  }
  return out;
}

struct MatmulCase {
  bool trans_a;
  bool trans_b;
  bool bias;
  float alpha;
  float beta;
};

class CpuMatmul : public ::testing::TestWithParam<MatmulCase> {};

// Also with one row (M = 1: the KV-cache decoder's products, which run as a gemv, one_row_product.h).
TEST_P(CpuMatmul, MatchesNaiveLoopInF64AndF32) {
  const MatmulCase c = GetParam();
  for (const std::pair<int64_t, int64_t> rows : {std::pair<int64_t, int64_t>{3, 13}, {1, 1}}) {
    // Named copies, not a structured binding: clang 16 cannot capture one in the lambdas below under OpenMP.
    const int64_t kB = rows.first, kT = rows.second;
    SCOPED_TRACE(fmt::format("B{} T{}", kB, kT));
    const int64_t kM = kB * kT, kK = 21, kN = 17;
    std::vector<double> a = random_vector(kM * kK, 11), b = random_vector(kK * kN, 12), bias = random_vector(kN, 13);
    std::vector<double> out0 = random_vector(kM * kN, 14);
    const std::vector<double> ref =
        naive_matmul(a, b, c.bias ? &bias : nullptr, out0, kM, kN, kK, c.trans_a, c.trans_b, c.alpha, c.beta);

    // beta == 0 must ignore whatever out held, NaN included.
    auto start = [&](const auto& init) {
      auto v = init;
      if (c.beta == 0.0f) std::fill(v.begin(), v.end(), NAN);
      return v;
    };
    // a is [B,T,K] (leading dims folded) or, transposed, [K,M]; b is [K,N] or [N,K].
    auto run = [&](auto& av, auto& bv, auto& biasv, auto& outv) {
      MatmulArgs args;
      args.out = view(outv, {kB, kT, kN});
      args.a = c.trans_a ? view(av, {kK, kM}) : view(av, {kB, kT, kK});
      args.b = c.trans_b ? view(bv, {kN, kK}) : view(bv, {kK, kN});
      if (c.bias) args.bias = view(biasv, {kN});
      args.trans_a = c.trans_a;
      args.trans_b = c.trans_b;
      args.alpha = c.alpha;
      args.beta = c.beta;
      cpu_backend().matmul(args);
    };

    std::vector<double> out64 = start(out0);
    run(a, b, bias, out64);
    EXPECT_LT(max_rel_error(out64, ref), 1e-12);

    std::vector<float> a32 = test::to_f32(a), b32 = test::to_f32(b), bias32 = test::to_f32(bias);
    std::vector<float> out32 = start(test::to_f32(out0));
    run(a32, b32, bias32, out32);
    EXPECT_LT(max_rel_error(out32, ref, 1.0), 1e-5);
  }
}

INSTANTIATE_TEST_SUITE_P(AllFlags, CpuMatmul,
                         ::testing::Values(MatmulCase{false, false, false, 1.0f, 0.0f}, MatmulCase{false, true, true, 1.0f, 0.0f},
                                           MatmulCase{true, false, false, 0.5f, 1.0f}, MatmulCase{true, true, true, -1.5f, 0.25f},
                                           MatmulCase{false, true, false, 0.7f, 0.3f}, MatmulCase{true, false, true, 1.0f, 0.0f}));

TEST(CpuMatmulShapes, RejectsMismatchedOperands) {
  std::vector<double> a(6 * 4), b(5 * 3), out(6 * 3), bias(4);
  MatmulArgs args{view(out, {6, 3}), view(a, {6, 4}), view(b, {5, 3})};
  EXPECT_THROW(cpu_backend().matmul(args), Error);  // inner dimensions 4 vs 5
  std::vector<double> b_ok(4 * 3);
  args.b = view(b_ok, {4, 3});
  args.bias = view(bias, {4});
  EXPECT_THROW(cpu_backend().matmul(args), Error);  // bias of 4 for 3 columns
  args.bias = Tensor();
  args.out = view(out, {3, 6});
  EXPECT_THROW(cpu_backend().matmul(args), Error);  // out is [3,6], not [6,3]
}

// A linear layer y = x W^T + b, x [N,IC], W [OC,IC], as the model runs it: forward matmul(trans_b),
// backward dx = dy W, dW += dy^T x (trans_a, beta = 1), db += colsum(dy). L = sum(y * R), f64,
// h = 1e-6, normwise relative tolerance 1e-6.
TEST(CpuMatmulGrad, LinearLayerMatchesFiniteDifferences) {
  constexpr int64_t kN = 10, kIC = 13, kOC = 9;
  std::vector<double> x = random_vector(kN * kIC, 21), w = random_vector(kOC * kIC, 22), b = random_vector(kOC, 23);
  std::vector<double> r = random_vector(kN * kOC, 24);
  std::vector<double> y(kN * kOC);
  auto loss = [&] {
    cpu_backend().matmul({view(y, {kN, kOC}), view(x, {kN, kIC}), view(w, {kOC, kIC}), view(b, {kOC}), false, true});
    return test::dot(y, r);
  };

  std::vector<double> dx(kN * kIC, NAN);
  std::vector<double> dw0 = random_vector(kOC * kIC, 25), db0 = random_vector(kOC, 26);
  std::vector<double> dw = dw0, db = db0;
  cpu_backend().matmul({view(dx, {kN, kIC}), view(r, {kN, kOC}), view(w, {kOC, kIC})});
  cpu_backend().matmul({view(dw, {kOC, kIC}), view(r, {kN, kOC}), view(x, {kN, kIC}), Tensor(), true, false, 1.0f, 1.0f});
  cpu_backend().bias_backward({view(db, {kOC}), view(r, {kN, kOC})});
  for (size_t i = 0; i < dw.size(); ++i) dw[i] -= dw0[i];
  for (size_t i = 0; i < db.size(); ++i) db[i] -= db0[i];

  EXPECT_LT(test::max_normwise_error(dx, test::numeric_gradient(x, loss)), 1e-6);
  EXPECT_LT(test::max_normwise_error(dw, test::numeric_gradient(w, loss)), 1e-6);
  EXPECT_LT(test::max_normwise_error(db, test::numeric_gradient(b, loss)), 1e-6);
}

TEST(CpuBiasBackward, AccumulatesColumnSumsIdenticallyForAnyThreadCount) {
  constexpr int64_t kB = 4, kT = 33, kC = 150;  // three column blocks, the last one partial
  std::vector<double> dout = random_vector(kB * kT * kC, 31);
  std::vector<double> db0 = random_vector(kC, 32);
  std::vector<double> expect = db0;
  for (int64_t i = 0; i < kB * kT; ++i)
    for (int64_t j = 0; j < kC; ++j) expect[j] += dout[i * kC + j];

  std::vector<double> db = db0;
  cpu_backend().bias_backward({view(db, {kC}), view(dout, {kB, kT, kC})});
  EXPECT_LT(max_rel_error(db, expect), 1e-13);

  std::vector<float> dout32 = test::to_f32(dout);
  auto run32 = [&](int threads) {
    const int saved = omp_get_max_threads();
    omp_set_num_threads(threads);
    std::vector<float> db32 = test::to_f32(db0);
    cpu_backend().bias_backward({view(db32, {kC}), view(dout32, {kB * kT, kC})});
    omp_set_num_threads(saved);
    return db32;
  };
  const std::vector<float> one = run32(1), three = run32(3);
  EXPECT_EQ(one, three);
  EXPECT_LT(max_rel_error(one, expect, 1.0), 1e-5);
}

}  // namespace
}  // namespace gpt
