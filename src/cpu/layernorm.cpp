// LayerNorm over the last dimension C of in [N,C] (leading dimensions folded), as llm.c's layernorm:
//   mean = sum(x)/C, rstd = 1/sqrt(sum((x-mean)^2)/C + eps), n = (x-mean)*rstd, out = n*w + b;
// mean and rstd [N] are saved for backward. Backward, with dn = w*dout:
//   din += (dn - mean(dn) - n*mean(dn*n)) * rstd,  dweight += sum_rows(dout*n),  dbias += sum_rows(dout).
// Rows are independent (OpenMP over rows; double accumulators, summed in lane_sum's fixed order). The
// weight/bias reductions run in a second pass where threads own blocks of columns and walk the rows in
// order, so they are bitwise reproducible whatever the thread count.
// The fused residual ops are, on the CPU, the two ops in turn: the reference defines the fusion as exactly
// that composition (the sum normalised as stored), and a row-wise pass here would save little next to
// the products. The checks that the two halves share one tensor are backend-neutral (backend/fused_args.h).
#include "backend/fused_args.h"
#include "backend/op_checks.h"

#include "cpu/cpu_backend.h"
#include "cpu/dispatch.h"
#include "cpu/wide_operands.h"
#include "cpu/vec_math.h"

#include <algorithm>
#include <cmath>

namespace gpt::cpu {
namespace {

// Below this many elements a parallel region costs more than it saves.
constexpr int64_t kParallelMin = 1 << 14;

template <class T>
void layernorm_forward_kernel(T* out, T* mean, T* rstd, const T* in, const T* weight, const T* bias, int64_t n_rows, int64_t c,
                              double eps) {
#pragma omp parallel for schedule(static) if (n_rows * c > kParallelMin)
  for (int64_t i = 0; i < n_rows; ++i) {
    const T* x = in + i * c;
    const double m = lane_sum(c, [&](int64_t j) { return x[j]; }) / c;
    const double var = lane_sum(c, [&](int64_t j) {
      const double d = x[j] - m;
      return d * d;
    });
    const double s = 1.0 / std::sqrt(var / c + eps);
    T* y = out + i * c;
    for (int64_t j = 0; j < c; ++j) y[j] = static_cast<T>((x[j] - m) * s * weight[j] + bias[j]);
    mean[i] = static_cast<T>(m);
    rstd[i] = static_cast<T>(s);
  }
}

template <class T>
void layernorm_input_grad(T* din, const T* dout, const T* in, const T* weight, const T* mean, const T* rstd, int64_t n_rows,
                          int64_t c) {
#pragma omp parallel for schedule(static) if (n_rows * c > kParallelMin)
  for (int64_t i = 0; i < n_rows; ++i) {
    const T* x = in + i * c;
    const T* dy = dout + i * c;
    const double m = mean[i], s = rstd[i];
    double dn_sum = 0, dn_n_sum = 0;
    lane_sum2(
        c,
        [&](int64_t j, double& a, double& b) {
          const double dn = static_cast<double>(weight[j]) * dy[j];
          a = dn;
          b = dn * ((x[j] - m) * s);
        },
        dn_sum, dn_n_sum);
    const double dn_mean = dn_sum / c, dn_n_mean = dn_n_sum / c;
    T* dx = din + i * c;
    for (int64_t j = 0; j < c; ++j) {
      const double dn = static_cast<double>(weight[j]) * dy[j];
      const double norm = (x[j] - m) * s;
      dx[j] = static_cast<T>(dx[j] + (dn - dn_mean - norm * dn_n_mean) * s);
    }
  }
}

constexpr int64_t kColumnBlock = 64;

template <class T>
void layernorm_param_grads(T* dweight, T* dbias, const T* dout, const T* in, const T* mean, const T* rstd, int64_t n_rows,
                           int64_t c) {
  const int64_t blocks = (c + kColumnBlock - 1) / kColumnBlock;
#pragma omp parallel for schedule(static) if (n_rows * c > kParallelMin)
  for (int64_t blk = 0; blk < blocks; ++blk) {
    const int64_t j0 = blk * kColumnBlock;
    const int64_t width = std::min(kColumnBlock, c - j0);
    Accum<T> dw[kColumnBlock] = {}, db[kColumnBlock] = {};
    for (int64_t i = 0; i < n_rows; ++i) {
      const T* x = in + i * c + j0;
      const T* dy = dout + i * c + j0;
      const Accum<T> m = mean[i], s = rstd[i];
      for (int64_t j = 0; j < width; ++j) {
        dw[j] += dy[j] * ((x[j] - m) * s);
        db[j] += dy[j];
      }
    }
    for (int64_t j = 0; j < width; ++j) {
      dweight[j0 + j] = static_cast<T>(dweight[j0 + j] + dw[j]);
      dbias[j0 + j] = static_cast<T>(dbias[j0 + j] + db[j]);
    }
  }
}

}  // namespace

void CpuBackend::layernorm_forward(const LayerNormForwardArgs& given) {
  WideOperands w(staging_, {&given.out, &given.mean, &given.rstd, &given.in, &given.weight, &given.bias});
  LayerNormForwardArgs args = given;
  args.in = w.in(given.in);
  args.weight = w.in(given.weight);
  args.bias = w.in(given.bias);
  args.out = w.out(given.out);
  args.mean = w.out(given.mean);
  args.rstd = w.out(given.rstd);
  const auto [n, c] = check_layernorm_forward(args);
  const DType dtype = w.wide();
  dispatch_float(dtype, [&]<class T>(T) {
    layernorm_forward_kernel(args.out.as<T>(), args.mean.as<T>(), args.rstd.as<T>(), args.in.as<T>(), args.weight.as<T>(),
                             args.bias.as<T>(), n, c, static_cast<double>(args.eps));
  });
  w.store();
}

void CpuBackend::layernorm_backward(const LayerNormBackwardArgs& given) {
  WideOperands w(staging_, {&given.din, &given.dweight, &given.dbias, &given.dout, &given.in, &given.weight, &given.mean,
                            &given.rstd});
  LayerNormBackwardArgs args = given;
  args.dout = w.in(given.dout);
  args.in = w.in(given.in);
  args.weight = w.in(given.weight);
  args.mean = w.in(given.mean);
  args.rstd = w.in(given.rstd);
  args.din = w.out(given.din, true);
  args.dweight = w.out(given.dweight, true);
  args.dbias = w.out(given.dbias, true);
  const auto [n, c] = check_layernorm_backward(args);
  const DType dtype = w.wide();
  dispatch_float(dtype, [&]<class T>(T) {
    layernorm_input_grad(args.din.as<T>(), args.dout.as<T>(), args.in.as<T>(), args.weight.as<T>(), args.mean.as<T>(),
                         args.rstd.as<T>(), n, c);
    layernorm_param_grads(args.dweight.as<T>(), args.dbias.as<T>(), args.dout.as<T>(), args.in.as<T>(), args.mean.as<T>(),
                          args.rstd.as<T>(), n, c);
  });
  w.store();
}

void CpuBackend::residual_layernorm_forward(const ResidualLayerNormForwardArgs& args) {
  check_fused_args(args);
  residual_forward(args.residual);
  layernorm_forward(args.norm);
}

void CpuBackend::layernorm_residual_backward(const LayerNormResidualBackwardArgs& args) {
  check_fused_args(args);
  layernorm_backward(args.norm);
  residual_backward(args.residual);
}

}  // namespace gpt::cpu
