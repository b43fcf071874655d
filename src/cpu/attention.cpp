// Causal multi-head self-attention with materialised probabilities, as llm.c's CPU attention, blocked
// over query rows so the products run as BLAS gemms on strided views.
// Layout: qkv [B,T,3C] with q, k, v of head h in columns h*hs, C + h*hs, 2C + h*hs (row stride 3C),
// hs = C / NH; out [B,T,C]; probs and dprobs [B,NH,T,T]. For each (b, h), with s = 1/sqrt(hs):
//   forward:  S = s q k^T;  P = softmax of row t over t2 <= t (probs; the upper triangle is stored 0)
//             Pd = P ⊙ M / (1-p), M the dropout mask at flat index ((b*NH + h)*T + t)*T + t2
//             out = Pd v
//   backward: dv = Pd^T dout;  dPd = dout v^T;  dP = dPd ⊙ M / (1-p)
//             dS = P ⊙ (dP - rowsum(dP ⊙ P)) = Pd ⊙ dPd - P rowsum(Pd ⊙ dPd)   (kept in dprobs)
//             dq = s dS k;  dk = s dS^T q
// (P ⊙ dP = Pd ⊙ dPd, so the backward reads the mask once, through Pd.)
// Query rows [r0, r1) attend only to keys [0, r1), so each row block multiplies just that part of the
// triangle. The forward runs (b, h, row block) items in parallel, the backward (b, h) pairs, because
// dk and dv sum over all row blocks; every item writes disjoint outputs, so results do not depend on
// the thread count or schedule. Exponentials in the tensor's precision (exp_of), row sums in double in
// lane_sum's fixed order (vec_math.h).
#include "cpu/cpu_backend.h"
#include "backend/op_checks.h"
#include "cpu/bf16_elements.h"
#include "cpu/dispatch.h"
#include "cpu/wide_operands.h"
#include "cpu/dropout.h"
#include "cpu/vec_math.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace gpt::cpu {
namespace {

constexpr int64_t kRowBlock = 64;

// Row-major C[m,n] = alpha op(A) op(B) + beta C with op(A) [m,k] and op(B) [k,n].
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
          const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha,
              a, lda, b, ldb, beta, c, ldc);
}

void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, const double* a, int64_t lda,
          const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  cblas_dgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha,
              a, lda, b, ldb, beta, c, ldc);
}

struct Dims : AttentionDims {
  int64_t row_blocks() const { return (seq + kRowBlock - 1) / kRowBlock; }
};

// Rows [r0, r1) of p (row stride seq) with dropout applied, as a [r1-r0, r1] block in a per-thread
// buffer (grown on the first calls, then reused); mask_base is the flat mask index of p[0][0].
template <class T>
const T* dropped_rows(const T* p, const Dims& d, int64_t r0, int64_t r1, uint64_t mask_base, const DropoutMask& mask) {
  thread_local std::vector<T> buffer;
  buffer.resize(static_cast<size_t>((r1 - r0) * r1));
  const T scale = static_cast<T>(mask.scale());
  DropoutCursor cursor(mask);
  for (int64_t t = r0; t < r1; ++t) {
    const T* row = p + t * d.seq;
    T* out = buffer.data() + (t - r0) * r1;
    const uint64_t base = mask_base + static_cast<uint64_t>(t * d.seq);
    for (int64_t t2 = 0; t2 <= t; ++t2) out[t2] = cursor.keep(base + t2) ? row[t2] * scale : T(0);
    std::fill(out + t + 1, out + r1, T(0));
  }
  return buffer.data();
}

// The products of one head read its q, k and v as rows of hs values, ld apart: in place in qkv (ld = 3C) for
// a wide qkv, or decoded from BF16 into per-thread blocks (ld = hs).

// Query rows [r0, r1) of head bh = b * NH + h: probs rows [r0, r1) of p (the head's [T, T]) and the output
// rows, ld_out apart from out. q points at query row r0, k and v at row 0.
template <class T>
void attention_rows_forward(T* out, int64_t ld_out, T* p, const T* q, const T* k, const T* v, int64_t ld, int64_t bh,
                            int64_t r0, int64_t r1, const Dims& d, const DropoutMask& mask) {
  const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(d.head_size)));
  const int64_t rows = r1 - r0, hs = d.head_size;
  gemm(false, true, rows, r1, hs, scale, q, ld, k, ld, T(0), p + r0 * d.seq, d.seq);
  for (int64_t t = r0; t < r1; ++t) {
    T* row = p + t * d.seq;
    softmax_row(row, row, t + 1);
    std::fill(row + t + 1, row + d.seq, T(0));
  }
  const T* pd = p + r0 * d.seq;
  int64_t ld_pd = d.seq;
  if (mask.active()) {
    pd = dropped_rows(p, d, r0, r1, static_cast<uint64_t>(bh * d.seq * d.seq), mask);
    ld_pd = r1;
  }
  gemm(false, false, rows, hs, r1, T(1), pd, ld_pd, v, ld, T(0), out, ld_out);
}

// The gradients of head bh: dq, dk, dv (rows ld_grad apart) from dO (rows ld_dout apart), with p its probs
// and dp its dprobs ([T, T] each); q, k, v rows ld apart.
template <class T>
void attention_head_backward(T* dq, T* dk, T* dv, int64_t ld_grad, T* dp, const T* dO, int64_t ld_dout, const T* p, const T* q,
                             const T* k, const T* v, int64_t ld, int64_t bh, const Dims& d, const DropoutMask& mask) {
  const int64_t hs = d.head_size;
  const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(hs)));
  const uint64_t mask_base = static_cast<uint64_t>(bh * d.seq * d.seq);
  for (int64_t t = 0; t < d.seq; ++t) {
    for (T* g : {dq, dk, dv}) std::fill_n(g + t * ld_grad, hs, T(0));
  }
  for (int64_t r0 = 0; r0 < d.seq; r0 += kRowBlock) {
    const int64_t r1 = std::min(r0 + kRowBlock, d.seq), rows = r1 - r0;
    const T* pd = p + r0 * d.seq;
    int64_t ld_pd = d.seq;
    if (mask.active()) {
      pd = dropped_rows(p, d, r0, r1, mask_base, mask);
      ld_pd = r1;
    }
    gemm(true, false, r1, hs, rows, T(1), pd, ld_pd, dO + r0 * ld_dout, ld_dout, T(1), dv, ld_grad);
    gemm(false, true, rows, r1, hs, T(1), dO + r0 * ld_dout, ld_dout, v, ld, T(0), dp + r0 * d.seq, d.seq);
    for (int64_t t = r0; t < r1; ++t) {
      const T* p_row = p + t * d.seq;
      const T* pd_row = pd + (t - r0) * ld_pd;
      T* row = dp + t * d.seq;
      const T dot_t =
          static_cast<T>(lane_sum(t + 1, [&](int64_t t2) { return static_cast<double>(pd_row[t2]) * row[t2]; }));
      for (int64_t t2 = 0; t2 <= t; ++t2) row[t2] = pd_row[t2] * row[t2] - p_row[t2] * dot_t;
      std::fill(row + t + 1, row + d.seq, T(0));
    }
    gemm(false, false, rows, hs, r1, scale, dp + r0 * d.seq, d.seq, k, ld, T(0), dq + r0 * ld_grad, ld_grad);
    gemm(true, false, r1, hs, rows, scale, dp + r0 * d.seq, d.seq, q + r0 * ld, ld, T(1), dk, ld_grad);
  }
}

template <class T>
void attention_forward_kernel(T* out, T* probs, const T* qkv, const Dims& d, const DropoutMask& mask) {
  const int64_t C = d.channels, hs = d.head_size, ld_qkv = 3 * C;
  const int64_t blocks = d.row_blocks();
#pragma omp parallel for schedule(dynamic)
  for (int64_t item = 0; item < d.batch * d.heads * blocks; ++item) {
    const int64_t bh = item / blocks, b = bh / d.heads, h = bh % d.heads;
    const int64_t r0 = (item % blocks) * kRowBlock, r1 = std::min(r0 + kRowBlock, d.seq);
    const T* q = qkv + b * d.seq * ld_qkv + h * hs;
    attention_rows_forward(out + (b * d.seq + r0) * C + h * hs, C, probs + bh * d.seq * d.seq, q + r0 * ld_qkv, q + C,
                           q + 2 * C, ld_qkv, bh, r0, r1, d, mask);
  }
}

template <class T>
void attention_backward_kernel(T* dqkv, T* dprobs, const T* dout, const T* qkv, const T* probs, const Dims& d,
                               const DropoutMask& mask) {
  const int64_t C = d.channels, hs = d.head_size, ld_qkv = 3 * C;
#pragma omp parallel for schedule(static)
  for (int64_t bh = 0; bh < d.batch * d.heads; ++bh) {
    const int64_t b = bh / d.heads, h = bh % d.heads;
    const T* q = qkv + b * d.seq * ld_qkv + h * hs;
    T* dq = dqkv + b * d.seq * ld_qkv + h * hs;
    attention_head_backward(dq, dq + C, dq + 2 * C, ld_qkv, dprobs + bh * d.seq * d.seq, dout + b * d.seq * C + h * hs, C,
                            probs + bh * d.seq * d.seq, q, q + C, q + 2 * C, ld_qkv, bh, d, mask);
  }
}

// The narrow recipes' attention: qkv, out, dout and dqkv BF16, probs and dprobs F32. Each work item decodes
// the rows of q, k, v (and dout) it multiplies into per-thread FP32 blocks, runs the FP32 kernel's
// products on them (the same values: sgemm's result does not depend on the operands' row stride) and
// rounds its outputs into the BF16 tensors once, instead of staging all of qkv, dqkv and out.

// rows [r0, r1) of the hs columns at column c0 of the BF16 matrix x (row length ld), densely into dst.
void decode_rows(float* dst, const Bf16* x, int64_t ld, int64_t c0, int64_t r0, int64_t r1, int64_t hs) {
  for (int64_t t = r0; t < r1; ++t) {
    const Bf16* row = x + t * ld + c0;
    float* out = dst + (t - r0) * hs;
    for (int64_t j = 0; j < hs; ++j) out[j] = bf16_value(row[j]);
  }
}

// The dense FP32 block src [r1 - r0, hs] rounded into rows [r0, r1), columns [c0, c0 + hs) of x.
void round_rows(Bf16* x, int64_t ld, int64_t c0, int64_t r0, int64_t r1, int64_t hs, const float* src) {
  for (int64_t t = r0; t < r1; ++t) {
    Bf16* row = x + t * ld + c0;
    const float* in = src + (t - r0) * hs;
    for (int64_t j = 0; j < hs; ++j) row[j] = bf16_round(in[j]);
  }
}

void attention_forward_bf16(Bf16* out, float* probs, const Bf16* qkv, const Dims& d, const DropoutMask& mask) {
  const int64_t C = d.channels, hs = d.head_size, ld_qkv = 3 * C;
  const int64_t blocks = d.row_blocks();
#pragma omp parallel for schedule(dynamic)
  for (int64_t item = 0; item < d.batch * d.heads * blocks; ++item) {
    const int64_t bh = item / blocks, b = bh / d.heads, h = bh % d.heads;
    const int64_t r0 = (item % blocks) * kRowBlock, r1 = std::min(r0 + kRowBlock, d.seq), rows = r1 - r0;
    // q rows [r0, r1), k and v rows [0, r1), the output rows [r0, r1): the FP32 kernel's operands of this item.
    thread_local std::vector<float> block;
    block.resize(static_cast<size_t>((2 * rows + 2 * r1) * hs));
    float* q = block.data();
    float* k = q + rows * hs;
    float* v = k + r1 * hs;
    float* o = v + r1 * hs;
    const Bf16* x = qkv + b * d.seq * ld_qkv;
    decode_rows(q, x, ld_qkv, h * hs, r0, r1, hs);
    decode_rows(k, x, ld_qkv, C + h * hs, 0, r1, hs);
    decode_rows(v, x, ld_qkv, 2 * C + h * hs, 0, r1, hs);
    attention_rows_forward(o, hs, probs + bh * d.seq * d.seq, q, k, v, hs, bh, r0, r1, d, mask);
    round_rows(out + b * d.seq * C, C, h * hs, r0, r1, hs, o);
  }
}

void attention_backward_bf16(Bf16* dqkv, float* dprobs, const Bf16* dout, const Bf16* qkv, const float* probs, const Dims& d,
                             const DropoutMask& mask) {
  const int64_t C = d.channels, hs = d.head_size, ld_qkv = 3 * C, T = d.seq;
#pragma omp parallel for schedule(static)
  for (int64_t bh = 0; bh < d.batch * d.heads; ++bh) {
    const int64_t b = bh / d.heads, h = bh % d.heads;
    // q, k, v, dout, then dq, dk, dv: [T, hs] each.
    thread_local std::vector<float> block;
    block.resize(static_cast<size_t>(7 * T * hs));
    float* q = block.data();
    float* k = q + T * hs;
    float* v = k + T * hs;
    float* dO = v + T * hs;
    float* dq = dO + T * hs;
    float* dk = dq + T * hs;
    float* dv = dk + T * hs;
    const Bf16* x = qkv + b * T * ld_qkv;
    decode_rows(q, x, ld_qkv, h * hs, 0, T, hs);
    decode_rows(k, x, ld_qkv, C + h * hs, 0, T, hs);
    decode_rows(v, x, ld_qkv, 2 * C + h * hs, 0, T, hs);
    decode_rows(dO, dout + b * T * C, C, h * hs, 0, T, hs);
    attention_head_backward(dq, dk, dv, hs, dprobs + bh * T * T, dO, hs, probs + bh * T * T, q, k, v, hs, bh, d, mask);
    Bf16* g = dqkv + b * T * ld_qkv;
    round_rows(g, ld_qkv, h * hs, 0, T, hs, dq);
    round_rows(g, ld_qkv, C + h * hs, 0, T, hs, dk);
    round_rows(g, ld_qkv, 2 * C + h * hs, 0, T, hs, dv);
  }
}

}  // namespace

void CpuBackend::attention_forward(const AttentionForwardArgs& given) {
  if (all_bf16({&given.out, &given.qkv}) && given.probs.dtype == DType::F32) {
    const Dims d{check_attention_forward(given)};
    attention_forward_bf16(given.out.as<Bf16>(), given.probs.as<float>(), given.qkv.as<Bf16>(), d, DropoutMask(given.dropout));
    return;
  }
  WideOperands w(staging_, {&given.out, &given.probs, &given.qkv});
  AttentionForwardArgs args = given;
  args.qkv = w.in(given.qkv);
  args.out = w.out(given.out);
  args.probs = w.out(given.probs);
  const Dims d{check_attention_forward(args)};
  const DropoutMask mask(args.dropout);
  dispatch_float(w.wide(), [&](auto zero) {
    using T = decltype(zero);
    attention_forward_kernel(args.out.as<T>(), args.probs.as<T>(), args.qkv.as<T>(), d, mask);
  });
  w.store();
}

void CpuBackend::attention_backward(const AttentionBackwardArgs& given) {
  if (all_bf16({&given.dqkv, &given.dout, &given.qkv}) && given.probs.dtype == DType::F32 && given.dprobs.dtype == DType::F32) {
    const Dims d{check_attention_backward(given)};
    attention_backward_bf16(given.dqkv.as<Bf16>(), given.dprobs.as<float>(), given.dout.as<Bf16>(), given.qkv.as<Bf16>(),
                            given.probs.as<float>(), d, DropoutMask(given.dropout));
    return;
  }
  WideOperands w(staging_, {&given.dqkv, &given.dprobs, &given.dout, &given.qkv, &given.probs});
  AttentionBackwardArgs args = given;
  args.dout = w.in(given.dout);
  args.qkv = w.in(given.qkv);
  args.probs = w.in(given.probs);
  args.dqkv = w.out(given.dqkv);
  args.dprobs = w.out(given.dprobs);
  const Dims d{check_attention_backward(args)};
  const DropoutMask mask(args.dropout);
  dispatch_float(w.wide(), [&](auto zero) {
    using T = decltype(zero);
    attention_backward_kernel(args.dqkv.as<T>(), args.dprobs.as<T>(), args.dout.as<T>(), args.qkv.as<T>(),
                              args.probs.as<T>(), d, mask);
  });
  w.store();
}

}  // namespace gpt::cpu
