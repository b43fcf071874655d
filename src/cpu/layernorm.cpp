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
#include "cpu/bf16_elements.h"
#include "cpu/dispatch.h"
#include "cpu/wide_operands.h"
#include "cpu/vec_math.h"

#include <algorithm>
#include <cmath>

namespace gpt::cpu {
namespace {

// Below this many elements a parallel region costs more than it saves.
constexpr int64_t kParallelMin = 1 << 14;

// T: the statistics' type and what the kernel computes in (with double accumulators); E: the activations'
// element type (T itself, or Bf16 read and written in place); W: the weight and bias's.
template <class T, class E, class W>
void layernorm_forward_kernel(E* out, T* mean, T* rstd, const E* in, const W* weight, const W* bias, int64_t n_rows, int64_t c,
                              double eps) {
#pragma omp parallel for schedule(static) if (n_rows * c > kParallelMin)
  for (int64_t i = 0; i < n_rows; ++i) {
    const E* x = in + i * c;
    const double m = lane_sum(c, [&](int64_t j) { return widen(x[j]); }) / c;
    const double var = lane_sum(c, [&](int64_t j) {
      const double d = widen(x[j]) - m;
      return d * d;
    });
    const double s = 1.0 / std::sqrt(var / c + eps);
    E* y = out + i * c;
    for (int64_t j = 0; j < c; ++j) y[j] = stored_as<E>((widen(x[j]) - m) * s * widen(weight[j]) + widen(bias[j]));
    mean[i] = static_cast<T>(m);
    rstd[i] = static_cast<T>(s);
  }
}

template <class T, class E, class W>
void layernorm_input_grad(E* din, const E* dout, const E* in, const W* weight, const T* mean, const T* rstd, int64_t n_rows,
                          int64_t c) {
#pragma omp parallel for schedule(static) if (n_rows * c > kParallelMin)
  for (int64_t i = 0; i < n_rows; ++i) {
    const E* x = in + i * c;
    const E* dy = dout + i * c;
    const double m = mean[i], s = rstd[i];
    double dn_sum = 0, dn_n_sum = 0;
    lane_sum2(
        c,
        [&](int64_t j, double& a, double& b) {
          const double dn = static_cast<double>(widen(weight[j])) * widen(dy[j]);
          a = dn;
          b = dn * ((widen(x[j]) - m) * s);
        },
        dn_sum, dn_n_sum);
    const double dn_mean = dn_sum / c, dn_n_mean = dn_n_sum / c;
    E* dx = din + i * c;
    for (int64_t j = 0; j < c; ++j) {
      const double dn = static_cast<double>(widen(weight[j])) * widen(dy[j]);
      const double norm = (widen(x[j]) - m) * s;
      dx[j] = stored_as<E>(widen(dx[j]) + (dn - dn_mean - norm * dn_n_mean) * s);
    }
  }
}

constexpr int64_t kColumnBlock = 64;

// G: the parameter gradients' element type (T itself, or Bf16 under precision.grad_dtype: bf16).
template <class T, class E, class G>
void layernorm_param_grads(G* dweight, G* dbias, const E* dout, const E* in, const T* mean, const T* rstd, int64_t n_rows,
                           int64_t c) {
  const int64_t blocks = (c + kColumnBlock - 1) / kColumnBlock;
#pragma omp parallel for schedule(static) if (n_rows * c > kParallelMin)
  for (int64_t blk = 0; blk < blocks; ++blk) {
    const int64_t j0 = blk * kColumnBlock;
    const int64_t width = std::min(kColumnBlock, c - j0);
    Accum<T> dw[kColumnBlock] = {}, db[kColumnBlock] = {};
    for (int64_t i = 0; i < n_rows; ++i) {
      const E* x = in + i * c + j0;
      const E* dy = dout + i * c + j0;
      const Accum<T> m = mean[i], s = rstd[i];
      for (int64_t j = 0; j < width; ++j) {
        dw[j] += widen(dy[j]) * ((widen(x[j]) - m) * s);
        db[j] += widen(dy[j]);
      }
    }
    for (int64_t j = 0; j < width; ++j) {
      dweight[j0 + j] = stored_as<G>(widen(dweight[j0 + j]) + dw[j]);
      dbias[j0 + j] = stored_as<G>(widen(dbias[j0 + j]) + db[j]);
    }
  }
}

// The narrow recipes' LayerNorm: activations, weight and bias BF16, the statistics F32 (and the
// parameter gradients F32 or BF16). Read and written in the kernels' own loops, which is the staged
// kernels' arithmetic without a pass over every operand (six of them forward, eight backward).
bool f32_statistics(const Tensor& mean, const Tensor& rstd) { return mean.dtype == DType::F32 && rstd.dtype == DType::F32; }

}  // namespace

void CpuBackend::layernorm_forward(const LayerNormForwardArgs& given) {
  if (all_bf16({&given.out, &given.in, &given.weight, &given.bias}) && f32_statistics(given.mean, given.rstd)) {
    const auto [n, c] = check_layernorm_forward(given);
    layernorm_forward_kernel(given.out.as<Bf16>(), given.mean.as<float>(), given.rstd.as<float>(), given.in.as<Bf16>(),
                             given.weight.as<Bf16>(), given.bias.as<Bf16>(), n, c, static_cast<double>(given.eps));
    return;
  }
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
  dispatch_float(dtype, [&, n = n, c = c]<class T>(T) {
    layernorm_forward_kernel(args.out.as<T>(), args.mean.as<T>(), args.rstd.as<T>(), args.in.as<T>(), args.weight.as<T>(),
                             args.bias.as<T>(), n, c, static_cast<double>(args.eps));
  });
  w.store();
}

void CpuBackend::layernorm_backward(const LayerNormBackwardArgs& given) {
  if (all_bf16({&given.din, &given.dout, &given.in, &given.weight}) && f32_statistics(given.mean, given.rstd) &&
      given.dweight.dtype == given.dbias.dtype && (given.dweight.dtype == DType::F32 || given.dweight.dtype == DType::BF16)) {
    const auto [n, c] = check_layernorm_backward(given);
    const auto* dout = given.dout.as<Bf16>();
    const auto* in = given.in.as<Bf16>();
    const auto* mean = given.mean.as<float>();
    const auto* rstd = given.rstd.as<float>();
    layernorm_input_grad(given.din.as<Bf16>(), dout, in, given.weight.as<Bf16>(), mean, rstd, n, c);
    if (given.dweight.dtype == DType::BF16) {
      layernorm_param_grads(given.dweight.as<Bf16>(), given.dbias.as<Bf16>(), dout, in, mean, rstd, n, c);
    } else {
      layernorm_param_grads(given.dweight.as<float>(), given.dbias.as<float>(), dout, in, mean, rstd, n, c);
    }
    return;
  }
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
  dispatch_float(dtype, [&, n = n, c = c]<class T>(T) {
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
