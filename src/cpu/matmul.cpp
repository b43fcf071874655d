// matmul: out[M,N] = alpha * op(a)[M,K] op(b)[K,N] + beta * out + bias[N], one BLAS gemm (row-major;
// sgemm for f32, dgemm for f64), or for one row (M = 1) one gemv (one_row_product.h). Narrow operands
// with F32 ones go to narrow_matmul.h (oneDNN where the CPU multiplies BF16 natively, else decoded to
// FP32 in the planned workspace for sgemm): FP32
// accumulation, as the GPU's tensor cores; a narrow out is rounded once, after bias and beta. FP8
// operands enter as their unscaled codes and both inverse scales multiply the accumulator, through
// alpha, as cuBLASLt's FP8 product applies scale_a * scale_b: out = alpha a_inv b_inv (qa qb) + ... Narrow
// operands beside F64 ones (the FP64 reference checks) are staged whole (wide_operands.h) for dgemm. With
// beta = 0 the rows of out start as the bias and the gemm accumulates onto them; otherwise a bias pass
// follows the gemm. Leading dimensions are folded:
// a [B,T,C] tensor is the [B*T, C] matrix. a is [M,K] or, with trans_a, [K,M]; b is [K,N] or, with
// trans_b, [N,K] (a linear layer's weight W[OC,IC] is used with trans_b).
//
// bias_backward: dbias[j] += sum_i dout[i,j]. Threads own blocks of columns and walk all rows in order,
// so every column's sum has one fixed order (double accumulator) whatever the thread count.
#include "cpu/cpu_backend.h"
#include "backend/op_checks.h"
#include "cpu/bf16_elements.h"
#include "cpu/dispatch.h"
#include "cpu/narrow_matmul.h"
#include "cpu/one_row_product.h"
#include "cpu/wide_operands.h"
#include "precision/float_formats.h"

#include <cblas.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <type_traits>

namespace gpt::cpu {
namespace {

// Below this many elements a parallel region costs more than it saves.
constexpr int64_t kParallelMin = 1 << 14;

// A tensor seen as a matrix: all leading dimensions folded into rows.
struct MatrixShape {
  int64_t rows;
  int64_t cols;
};

MatrixShape as_matrix(const Tensor& t, const char* name) {
  GPT_CHECK(!t.empty() && t.ndim >= 1, "matmul: {} must be a tensor of rank >= 1", name);
  const int64_t cols = t.dim(-1);
  GPT_CHECK(cols > 0, "matmul: {} {} has no columns", name, t.shape_string());
  return {t.numel() / cols, cols};
}

template <class T>
void gemm(bool trans_a, bool trans_b, int m, int n, int k, T alpha, const T* a, int lda, const T* b, int ldb, T beta, T* c,
          int ldc) {
  if (m == 1) {
    one_row_product<T>(trans_a, trans_b, n, k, alpha, a, lda, b, ldb, beta, c);
    return;
  }
  const CBLAS_TRANSPOSE ta = trans_a ? CblasTrans : CblasNoTrans;
  const CBLAS_TRANSPOSE tb = trans_b ? CblasTrans : CblasNoTrans;
  if constexpr (std::is_same_v<T, float>) {
    cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  } else {
    cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  }
}

template <class T>
void add_bias(T* out, const T* bias, int64_t m, int64_t n) {
#pragma omp parallel for schedule(static) if (m * n > kParallelMin)
  for (int64_t i = 0; i < m; ++i) {
    T* row = out + i * n;
    for (int64_t j = 0; j < n; ++j) row[j] += bias[j];
  }
}

// out[i,:] = bias for every row: the starting value of a beta = 1 gemm.
template <class T>
void broadcast_bias(T* out, const T* bias, int64_t m, int64_t n) {
#pragma omp parallel for schedule(static) if (m * n > kParallelMin)
  for (int64_t i = 0; i < m; ++i) std::memcpy(out + i * n, bias, static_cast<size_t>(n) * sizeof(T));
}

constexpr int64_t kColumnBlock = 64;

// W: dout's element type, T's own or Bf16 (read in place, see bias_backward).
template <class T, class W>
void bias_backward_kernel(T* dbias, const W* dout, int64_t m, int64_t n) {
  const int64_t blocks = (n + kColumnBlock - 1) / kColumnBlock;
#pragma omp parallel for schedule(static) if (m * n > kParallelMin)
  for (int64_t blk = 0; blk < blocks; ++blk) {
    const int64_t j0 = blk * kColumnBlock;
    const int64_t width = std::min(kColumnBlock, n - j0);
    Accum<T> acc[kColumnBlock] = {};
    for (int64_t i = 0; i < m; ++i) {
      const W* row = dout + i * n + j0;
      for (int64_t j = 0; j < width; ++j) acc[j] += widen(row[j]);
    }
    for (int64_t j = 0; j < width; ++j) dbias[j0 + j] = static_cast<T>(dbias[j0 + j] + acc[j]);
  }
}

}  // namespace

void CpuBackend::matmul(const MatmulArgs& given) {
  const std::initializer_list<const Tensor*> tensors = {&given.out, &given.a, &given.b, &given.bias};
  const bool narrow = std::any_of(tensors.begin(), tensors.end(), [](const Tensor* t) { return !t->empty() && is_narrow_float(t->dtype); });
  const bool f64 = std::any_of(tensors.begin(), tensors.end(), [](const Tensor* t) { return !t->empty() && t->dtype == DType::F64; });
  WideOperands w(staging_, narrow && !f64 ? std::initializer_list<const Tensor*>{} : tensors);
  MatmulArgs args = given;
  if (f64) {
    args.a = w.in(given.a, false);
    args.b = w.in(given.b, false);
    args.bias = w.in(given.bias);
    args.out = w.out(given.out, given.beta != 0.0f);
  }
  for (const Tensor* t : {&given.a, &given.b})
    if (t->scaling && (t->dtype == DType::E4M3 || t->dtype == DType::E5M2)) args.alpha *= t->scaling->scale_inv;
  const MatrixShape a = as_matrix(args.a, "a");
  const MatrixShape b = as_matrix(args.b, "b");
  const MatrixShape out = as_matrix(args.out, "out");
  const int64_t m = args.trans_a ? a.cols : a.rows;
  const int64_t k = args.trans_a ? a.rows : a.cols;
  const int64_t kb = args.trans_b ? b.cols : b.rows;
  const int64_t n = args.trans_b ? b.rows : b.cols;
  GPT_CHECK(k == kb, "matmul: inner dimensions differ: op(a) is [{},{}] (a {}{}), op(b) is [{},{}] (b {}{})", m, k,
            args.a.shape_string(), args.trans_a ? " transposed" : "", kb, n, args.b.shape_string(),
            args.trans_b ? " transposed" : "");
  GPT_CHECK(out.rows == m && out.cols == n, "matmul: out {} should be [{},{}] (last dimension {}, leading ones folding to {})",
            args.out.shape_string(), m, n, n, m);
  GPT_CHECK(m <= INT_MAX && n <= INT_MAX && k <= INT_MAX, "matmul: [{},{}]x[{},{}] exceeds the BLAS int range", m, k, k, n);
  if (!args.bias.empty()) {
    GPT_CHECK(args.bias.numel() == n, "matmul: bias {} should have {} elements (the output columns)", args.bias.shape_string(), n);
  }
  if (narrow && !f64) {
    narrow_matmul(args, {m, n, k, a.cols, b.cols}, matmul_workspace_, onednn_.get());
    return;
  }
  dispatch_float(w.wide(), [&]<class T>(T) {
    // With beta = 0 the bias is the gemm's starting value (beta = 1): one pass over out instead of
    // BLAS's zeroing pass plus a bias pass.
    const bool bias_first = !args.bias.empty() && args.beta == 0.0f;
    if (bias_first) broadcast_bias(args.out.as<T>(), args.bias.as<T>(), m, n);
    gemm<T>(args.trans_a, args.trans_b, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), static_cast<T>(args.alpha),
            args.a.as<T>(), static_cast<int>(a.cols), args.b.as<T>(), static_cast<int>(b.cols),
            bias_first ? T(1) : static_cast<T>(args.beta), args.out.as<T>(), static_cast<int>(n));
    if (!args.bias.empty() && !bias_first) add_bias(args.out.as<T>(), args.bias.as<T>(), m, n);
  });
  w.store();
}

void CpuBackend::bias_backward(const BiasBackwardArgs& given) {
  // A BF16 dout (the narrow recipes' output gradients) is read in place: staging it would be a pass over
  // the whole [B*T, n] gradient to sum it once.
  const bool bf16_dout = given.dout.dtype == DType::BF16;
  WideOperands w(staging_, bf16_dout ? std::initializer_list<const Tensor*>{&given.dbias}
                                     : std::initializer_list<const Tensor*>{&given.dbias, &given.dout});
  BiasBackwardArgs args = given;
  if (!bf16_dout) args.dout = w.in(given.dout);
  args.dbias = w.out(given.dbias, true);
  const int64_t n = check_bias_backward(args);
  const int64_t m = n == 0 ? 0 : args.dout.numel() / n;
  dispatch_float(w.wide(), [&]<class T>(T) {
    if (bf16_dout) bias_backward_kernel(args.dbias.as<T>(), args.dout.as<Bf16>(), m, n);
    else bias_backward_kernel(args.dbias.as<T>(), args.dout.as<T>(), m, n);
  });
  w.store();
}

}  // namespace gpt::cpu
