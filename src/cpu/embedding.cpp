// Token + position embedding with dropout on the sum. tokens [B,T] i32, wte [Vp,C], wpe [maxT,C],
// out [B,T,C] (any shape of B*T*C elements with last dimension C):
//   out[b,t,c] = keep(i) * (wte[tokens[b,t],c] + wpe[t,c]) / (1-p),  i = (b*T + t)*C + c.
// Backward, with g = keep(i) * dout[b,t,c] / (1-p): dwte[tokens[b,t],c] += g, dwpe[t,c] += g.
// Repeated tokens make the token rows collide, so backward splits the channels among threads: each
// thread owns a block of columns and walks the tokens in order, which is race-free and reproducible
// whatever the thread count. Masks are read through a DropoutCursor per row (one Philox block per four
// elements).
#include "cpu/cpu_backend.h"
#include "backend/op_checks.h"
#include "cpu/bf16_elements.h"
#include "cpu/dispatch.h"
#include "cpu/wide_operands.h"
#include "cpu/dropout.h"

#include <algorithm>

namespace gpt::cpu {
namespace {

// Below this many elements a parallel region costs more than it saves.
constexpr int64_t kParallelMin = 1 << 14;

using EmbeddingShape = EmbeddingDims;

// The shared checks, then every token id against the vocabulary (the CPU reads them here; the CUDA
// kernels flag a bad one as they meet it).
EmbeddingShape embedding_shape(const char* op, const Tensor& x, const Tensor& tokens, const Tensor& wte, const Tensor& wpe,
                               const char* x_name) {
  const EmbeddingShape s = check_embedding(op, x, tokens, wte, wpe, x_name);
  const int32_t* ids = tokens.as<int32_t>();
  for (int64_t i = 0; i < s.b * s.t; ++i) {
    GPT_CHECK(ids[i] >= 0 && ids[i] < s.vocab, "{}: token {} at position {} is outside the vocabulary [0, {})", op, ids[i], i,
              s.vocab);
  }
  return s;
}

// W: the tables' element type, T's own or Bf16 (read in place, see embedding_forward).
template <class T, class W>
void embedding_forward_kernel(T* out, const int32_t* tokens, const W* wte, const W* wpe, EmbeddingShape s, const DropoutMask& mask) {
  const double scale = mask.scale();
#pragma omp parallel for schedule(static) if (s.b * s.t * s.c > kParallelMin)
  for (int64_t row = 0; row < s.b * s.t; ++row) {
    const W* te = wte + tokens[row] * s.c;
    const W* pe = wpe + (row % s.t) * s.c;
    T* y = out + row * s.c;
    if (!mask.active()) {
      for (int64_t c = 0; c < s.c; ++c) y[c] = static_cast<T>(static_cast<double>(widen(te[c])) + widen(pe[c]));
      continue;
    }
    DropoutCursor cursor(mask);
    for (int64_t c = 0; c < s.c; ++c) {
      const uint64_t i = static_cast<uint64_t>(row * s.c + c);
      y[c] = cursor.keep(i) ? static_cast<T>((static_cast<double>(widen(te[c])) + widen(pe[c])) * scale) : T(0);
    }
  }
}

constexpr int64_t kColumnBlock = 64;

template <class T>
void embedding_backward_kernel(T* dwte, T* dwpe, const T* dout, const int32_t* tokens, EmbeddingShape s, const DropoutMask& mask) {
  const double scale = mask.scale();
  const int64_t blocks = (s.c + kColumnBlock - 1) / kColumnBlock;
#pragma omp parallel for schedule(static) if (s.b * s.t * s.c > kParallelMin)
  for (int64_t blk = 0; blk < blocks; ++blk) {
    const int64_t c0 = blk * kColumnBlock;
    const int64_t c1 = std::min(s.c, c0 + kColumnBlock);
    for (int64_t row = 0; row < s.b * s.t; ++row) {
      T* te = dwte + tokens[row] * s.c;
      T* pe = dwpe + (row % s.t) * s.c;
      const T* dy = dout + row * s.c;
      DropoutCursor cursor(mask);
      for (int64_t c = c0; c < c1; ++c) {
        if (!cursor.keep(static_cast<uint64_t>(row * s.c + c))) continue;
        const double g = dy[c] * scale;
        te[c] = static_cast<T>(te[c] + g);
        pe[c] = static_cast<T>(pe[c] + g);
      }
    }
  }
}

}  // namespace

void CpuBackend::embedding_forward(const EmbeddingForwardArgs& given) {
  // BF16 tables (the narrow recipes' compute copy) are read in place: the lookup touches B*T rows, and
  // staging would decode all of wte (GPT-2's 38.6 M values, 30 ms a step on 2 cores) to read them.
  const bool bf16_tables = given.wte.dtype == DType::BF16 && given.wpe.dtype == DType::BF16;
  WideOperands w(staging_, bf16_tables ? std::initializer_list<const Tensor*>{&given.out}
                                       : std::initializer_list<const Tensor*>{&given.out, &given.wte, &given.wpe});
  EmbeddingForwardArgs args = given;
  if (!bf16_tables) {
    args.wte = w.in(given.wte);
    args.wpe = w.in(given.wpe);
  }
  args.out = w.out(given.out);
  const EmbeddingShape s = embedding_shape("embedding_forward", args.out, args.tokens, args.wte, args.wpe, "out");
  const DType dtype = w.wide();
  const DropoutMask mask(args.dropout);
  dispatch_float(dtype, [&]<class T>(T) {
    if (bf16_tables) {
      embedding_forward_kernel(args.out.as<T>(), args.tokens.as<int32_t>(), args.wte.as<Bf16>(), args.wpe.as<Bf16>(), s, mask);
    } else {
      embedding_forward_kernel(args.out.as<T>(), args.tokens.as<int32_t>(), args.wte.as<T>(), args.wpe.as<T>(), s, mask);
    }
  });
  w.store();
}

void CpuBackend::embedding_backward(const EmbeddingBackwardArgs& given) {
  WideOperands w(staging_, {&given.dwte, &given.dwpe, &given.dout});
  EmbeddingBackwardArgs args = given;
  args.dout = w.in(given.dout);
  args.dwte = w.out(given.dwte, true);
  args.dwpe = w.out(given.dwpe, true);
  const EmbeddingShape s = embedding_shape("embedding_backward", args.dout, args.tokens, args.dwte, args.dwpe, "dout");
  const DType dtype = w.wide();
  const DropoutMask mask(args.dropout);
  dispatch_float(dtype, [&]<class T>(T) {
    embedding_backward_kernel(args.dwte.as<T>(), args.dwpe.as<T>(), args.dout.as<T>(), args.tokens.as<int32_t>(), s, mask);
  });
  w.store();
}

}  // namespace gpt::cpu
