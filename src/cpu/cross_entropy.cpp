// Fused softmax cross-entropy over the first V = vocab_size columns of logits [N,Vp]; columns V..Vp-1
// are padding and take no part. Per row with target y:
//   s = sum_{j<V} exp(logits[j] - max);  loss = log s + max - logits[y]
//   dlogits[j] = (exp(logits[j] - max) / s - [j == y]) * dloss for j < V, 0 for padding columns.
// Rows with y == -1 get loss 0 and a zero dlogits row. Exponentials are in the logits' precision, FP32 for
// BF16 logits (exp_of, vec_math.h), sums in double in lane_sum's fixed order. Only the max and logits[y] are needed before a
// row of dlogits is written, so dlogits may alias logits.
// losses is f32, or f64 alongside f64 logits (for gradient checks).
#include "cpu/cpu_backend.h"
#include "backend/op_checks.h"
#include "cpu/bf16_elements.h"
#include "cpu/dispatch.h"
#include "cpu/wide_operands.h"
#include "cpu/vec_math.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <type_traits>
#include <vector>

namespace gpt::cpu {
namespace {

// T: what the kernel computes in; E: the logits' element type, T's own or Bf16 (the narrow recipes' logits,
// read and written in place); L: the losses'. Between the two passes the row's exp(x - max) is kept in
// FP32 or better, as the staged kernel kept it in its staging: in dx itself when dx is of type T, else in
// a per-thread row.
template <class T, class E, class L>
void cross_entropy_kernel(L* losses, E* dlogits, const E* logits, const int32_t* targets, int64_t rows,
                          int64_t padded_vocab, int64_t vocab, T dloss) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const E* x = logits + r * padded_vocab;
    E* dx = dlogits ? dlogits + r * padded_vocab : nullptr;
    const int32_t y = targets[r];
    if (y < 0) {
      losses[r] = 0;
      if (dx) std::fill(dx, dx + padded_vocab, stored_as<E>(T(0)));
      continue;
    }
    const T max_val = lane_max(x, vocab);
    const T x_y = widen(x[y]);  // read before dx, which may alias x, is written
    if (!dx) {
      const double sum = lane_sum(vocab, [&](int64_t j) { return exp_of(widen(x[j]) - max_val); });
      losses[r] = static_cast<L>(std::log(sum) + (static_cast<double>(max_val) - x_y));
      continue;
    }
    T* e = nullptr;
    if constexpr (std::is_same_v<E, T>) {
      e = dx;
    } else {
      thread_local std::vector<T> row;
      row.resize(static_cast<size_t>(vocab));
      e = row.data();
    }
    // Each exponential is computed once, kept in e for the second pass.
    const double sum = lane_sum(vocab, [&](int64_t j) {
      const T ej = exp_of(widen(x[j]) - max_val);
      e[j] = ej;
      return ej;
    });
    losses[r] = static_cast<L>(std::log(sum) + (static_cast<double>(max_val) - x_y));
    const T inv_sum = static_cast<T>(1.0 / sum);
    const T p_y = e[y] * inv_sum;
    for (int64_t j = 0; j < vocab; ++j) dx[j] = stored_as<E>((e[j] * inv_sum) * dloss);
    dx[y] = stored_as<E>((p_y - T(1)) * dloss);
    std::fill(dx + vocab, dx + padded_vocab, stored_as<E>(T(0)));
  }
}

}  // namespace

void CpuBackend::cross_entropy(const CrossEntropyArgs& given) {
  // BF16 logits (and dlogits, which the model aliases to them) are read and written in place: staging
  // them is a decode and an encode pass over the largest activation of the step ([B*T, Vp]).
  const bool bf16_logits = given.logits.dtype == DType::BF16 && (given.dlogits.empty() || given.dlogits.dtype == DType::BF16) &&
                           given.losses.dtype == DType::F32;
  WideOperands w(staging_, bf16_logits ? std::initializer_list<const Tensor*>{}
                                       : std::initializer_list<const Tensor*>{&given.logits, &given.dlogits});
  CrossEntropyArgs args = given;
  if (!bf16_logits) {
    args.logits = w.in(given.logits);
    args.dlogits = w.out(given.dlogits);
  }
  const Tensor& logits = args.logits;
  const auto [rows, padded_vocab] = check_cross_entropy(args);
  const int32_t* targets = args.targets.i32();
  for (int64_t r = 0; r < rows; ++r) {
    GPT_CHECK(targets[r] == -1 || (targets[r] >= 0 && targets[r] < args.vocab_size),
              "cross_entropy: target {} at row {} is outside [0, {}) and is not the ignore index -1", targets[r], r,
              args.vocab_size);
  }
  if (bf16_logits) {
    Bf16* dlogits = args.dlogits.empty() ? nullptr : args.dlogits.as<Bf16>();
    cross_entropy_kernel(args.losses.as<float>(), dlogits, logits.as<Bf16>(), targets, rows, padded_vocab, args.vocab_size,
                         args.dloss);
    return;
  }
  dispatch_float(w.wide(), [&, rows = rows, padded_vocab = padded_vocab](auto zero) {
    using T = decltype(zero);
    T* dlogits = args.dlogits.empty() ? nullptr : args.dlogits.as<T>();
    const T dloss = static_cast<T>(args.dloss);
    const auto run = [&](auto* losses) {
      cross_entropy_kernel(losses, dlogits, logits.as<T>(), targets, rows, padded_vocab, args.vocab_size, dloss);
    };
    if (args.losses.dtype == DType::F32) {
      run(args.losses.as<float>());
    } else {
      GPT_CHECK(args.losses.dtype == logits.dtype, "cross_entropy: losses must be f32 or {}, got {}",
                dtype_name(logits.dtype), dtype_name(args.losses.dtype));
      run(args.losses.as<T>());
    }
  });
  w.store();
}

}  // namespace gpt::cpu
