// A matrix product of one row, out[1,N] = alpha a[1,K] op(b) + beta out, as a BLAS matrix-vector product:
// the KV-cache decoder's products (one position at a time). OpenBLAS's gemv runs them 2x (weights streamed
// from memory: the 154 MB LM head of GPT-2 124M) to 5-12x (a block's weights, in the cache) faster than its
// gemm with M = 1 (measured single-threaded on an AMD EPYC Zen 4, FP32: the 2304 x 768 qkv weight 0.09 ms
// against 0.43, the LM head 11 ms against 23). Row-major, as cpu/matmul.cpp lays products out: with
// trans_b, b is [N,K] (ldb) and out = b a; without, b is [K,N] and out = b^T a; a is a's one row, or with
// trans_a its one column, lda apart. beta = 0 zeroes out first: OpenBLAS versions differ in whether gemv
// scales y by a zero beta or overwrites it, and 0 x NaN would keep a NaN that was in out.
#pragma once

#include <cblas.h>

#include <cstring>
#include <type_traits>

namespace gpt::cpu {

template <class T>
void one_row_product(bool trans_a, bool trans_b, int n, int k, T alpha, const T* a, int lda, const T* b, int ldb, T beta,
                     T* out) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>);
  const int inc = trans_a ? lda : 1;
  if (beta == T(0)) std::memset(out, 0, static_cast<size_t>(n) * sizeof(T));
  const int rows = trans_b ? n : k, cols = trans_b ? k : n;
  const CBLAS_TRANSPOSE t = trans_b ? CblasNoTrans : CblasTrans;
  if constexpr (std::is_same_v<T, float>) {
    cblas_sgemv(CblasRowMajor, t, rows, cols, alpha, b, ldb, a, inc, beta, out, 1);
  } else {
    cblas_dgemv(CblasRowMajor, t, rows, cols, alpha, b, ldb, a, inc, beta, out, 1);
  }
}

}  // namespace gpt::cpu
