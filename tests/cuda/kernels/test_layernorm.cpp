// layernorm_backward (cuda/kernels/layernorm.cu) on the emulator: its weight and bias gradients are sums
// over rows gathered as per-block partials and added in block order, so the same call gives the same
// bits whatever order the emulator runs the threads in (swept by schedule seed), and agrees with a
// double-precision sum of the rows.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "cuda/kernels/row_kernel_test_util.h"
#include "emu/control.h"
#include "kernels/layernorm.h"

namespace gpt::cuda::test {
namespace {

struct Grads {
  std::vector<float> din, dweight, dbias;
};

Grads run_backward(const TestContext& tc, int64_t n, int64_t c) {
  const auto dout = uniform(n * c, 1), in = uniform(n * c, 2, -2.0f, 3.0f), weight = uniform(c, 3, 0.5f, 1.5f);
  const auto mean = uniform(n, 4), rstd = uniform(n, 5, 0.5f, 2.0f);
  DeviceArray<float> d_dout(dout), d_in(in), d_weight(weight), d_mean(mean), d_rstd(rstd);
  DeviceArray<float> d_din(uniform(n * c, 6)), d_dweight(uniform(c, 7)), d_dbias(uniform(c, 8));
  LayerNormBackwardArgs a;
  a.din = device_tensor(d_din, {n, c});
  a.dweight = device_tensor(d_dweight, {c});
  a.dbias = device_tensor(d_dbias, {c});
  a.dout = device_tensor(d_dout, {n, c});
  a.in = device_tensor(d_in, {n, c});
  a.weight = device_tensor(d_weight, {c});
  a.mean = device_tensor(d_mean, {n});
  a.rstd = device_tensor(d_rstd, {n});
  layernorm_backward(a, tc.ctx);
  return {d_din.download(), d_dweight.download(), d_dbias.download()};
}

class LayerNormBackward : public EmuTest {};

TEST_F(LayerNormBackward, IsBitwiseReproducibleUnderEveryThreadOrder) {
  // One SM: 32 blocks of one warp (C = 203 and 256 have at most 32 chunks), each with 3 or 4 of the 100
  // rows, so every column sum has 32 partials to add.
  const TestContext tc(1);
  for (const int64_t c : {203, 256}) {
    emu::set_schedule_seed(0);
    const Grads first = run_backward(tc, 100, c);
    for (uint64_t seed = 1; seed <= 3; ++seed) {
      emu::set_schedule_seed(seed);
      const Grads again = run_backward(tc, 100, c);
      EXPECT_EQ(again.din, first.din) << "C " << c << " seed " << seed;
      EXPECT_EQ(again.dweight, first.dweight) << "C " << c << " seed " << seed;
      EXPECT_EQ(again.dbias, first.dbias) << "C " << c << " seed " << seed;
    }
  }
}

TEST_F(LayerNormBackward, ParameterGradientsMatchADoubleSumOverTheRows) {
  const TestContext tc(1);
  const int64_t n = 100, c = 203;
  const Grads got = run_backward(tc, n, c);
  const auto dout = uniform(n * c, 1), in = uniform(n * c, 2, -2.0f, 3.0f);
  const auto mean = uniform(n, 4), rstd = uniform(n, 5, 0.5f, 2.0f);
  const auto dweight0 = uniform(c, 7), dbias0 = uniform(c, 8);
  for (int64_t j = 0; j < c; ++j) {
    double dw = dweight0[j], db = dbias0[j], scale = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double norm = (static_cast<double>(in[i * c + j]) - mean[i]) * rstd[i];
      dw += dout[i * c + j] * norm;
      db += dout[i * c + j];
      scale += std::fabs(dout[i * c + j] * norm) + std::fabs(dout[i * c + j]);
    }
    EXPECT_NEAR(got.dweight[j], dw, 1e-6 * scale + 1e-6) << "column " << j;
    EXPECT_NEAR(got.dbias[j], db, 1e-6 * scale + 1e-6) << "column " << j;
  }
}

class LayerNormFormats : public EmuTest {};

// F64 is the CPU backend's format for gradient checks; the kernels compute in FP32 and say so.
TEST_F(LayerNormFormats, F64IsRefusedByName) {
  const TestContext tc(1);
  DeviceArray<double> x(4 * 8), w(8), stats(4);
  LayerNormForwardArgs a;
  a.out = Tensor(x.get(), {4, 8}, DType::F64, Device::CUDA);
  a.in = a.out;
  a.weight = a.bias = Tensor(w.get(), {8}, DType::F64, Device::CUDA);
  a.mean = a.rstd = Tensor(stats.get(), {4}, DType::F64, Device::CUDA);
  try {
    layernorm_forward(a, tc.ctx);
    FAIL() << "an f64 layernorm ran";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not f64"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace gpt::cuda::test
