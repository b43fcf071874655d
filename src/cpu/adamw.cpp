// AdamW with decoupled weight decay (Loshchilov & Hutter), bias-corrected, elementwise:
//   g = grad_scale * grad;  m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2
//   param -= lr * (m / (1-b1^step) / (sqrt(v / (1-b2^step)) + eps) + weight_decay * param)
// params, grads, m and v share one dtype; the bias corrections are computed once in double.
// Every operation rounds as written, in this order (fma: one rounding of a*b+c):
//   g = grad_scale * grad
//   m = fma(b1, m, (1-b1) * g)
//   v = fma(b2, v, ((1-b2) * g) * g)
//   u = fma(weight_decay, param, (m * c1) / (sqrt(v * c2) + eps))     c1, c2: 1 / (1 - b^step)
//   param = fma(-lr, u, param)
// cuda/kernels/adamw.cu computes the same expressions with the same roundings, so a GPU, the emulator
// and this file give the same bits, and optimizer offload (AdamW here, on the host) equals AdamW on the
// device. Nothing is left for a compiler to contract: each multiply-add is an explicit fma, and every
// other product feeds a product, a square root, a division or an fma's addend, never a sum (g++ contracts
// a*b+c by default with -march=native, nvcc with its default -fmad=true, and not alike).
// tests/cpu/test_adamw.cpp checks the bits against a reference whose every rounding is forced.
// The update streams 16 bytes per FP32 parameter in and 12 out, so it runs at memory speed only when
// vectorised; GCC does not vectorise a loop containing std::sqrt while sqrt may set errno (our flags
// keep -fmath-errno), so the body is written with std::experimental::simd (native width, e.g. 16 floats
// with AVX-512). Whole vectors start at multiples of the width, so which elements take the scalar tail
// depends on n alone, never on the thread count.
// With a compute copy (AdamWArgs::compute) the elements go in chunks of kChunk, each updated and then
// encoded into the copy by convert.h's encoder (the cast's own), while it is still in cache: the bits
// of a cast after the update, without a second pass over the masters.
#include "cpu/convert.h"
#include "cpu/cpu_backend.h"
#include "backend/op_checks.h"
#include "cpu/dispatch.h"
#include "cpu/wide_operands.h"

#include <algorithm>
#include <cmath>
// GCC 12 flags the deliberately uninitialised _mm512_undefined_ps() inside the AVX-512 sqrt that the simd
// types inline (-Wmaybe-uninitialized, a false positive in the compiler's own header).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <experimental/simd>
#pragma GCC diagnostic pop

namespace gpt::cpu {
namespace {

namespace stdx = std::experimental;

// Below this many elements a parallel region costs more than it saves.
constexpr int64_t kParallelMin = 1 << 14;

template <class T>
struct AdamWConstants {
  T lr, beta1, beta2, one_minus_beta1, one_minus_beta2, eps, weight_decay, grad_scale, inv_correction1, inv_correction2;

  explicit AdamWConstants(const AdamWArgs& a)
      : lr(static_cast<T>(a.lr)),
        beta1(static_cast<T>(a.beta1)),
        beta2(static_cast<T>(a.beta2)),
        one_minus_beta1(T(1) - beta1),
        one_minus_beta2(T(1) - beta2),
        eps(static_cast<T>(a.eps)),
        weight_decay(static_cast<T>(a.weight_decay)),
        grad_scale(static_cast<T>(a.grad_scale)),
        inv_correction1(static_cast<T>(1.0 / (1.0 - std::pow(static_cast<double>(a.beta1), static_cast<double>(a.step))))),
        inv_correction2(static_cast<T>(1.0 / (1.0 - std::pow(static_cast<double>(a.beta2), static_cast<double>(a.step))))) {}
};

// One element or one vector of elements; V is T or stdx::native_simd<T>.
template <class V, class T>
void adamw_element(V& param, const V& grad, V& m, V& v, const AdamWConstants<T>& k) {
  using std::fma;
  using std::sqrt;
  using stdx::fma;
  using stdx::sqrt;
  const V g = k.grad_scale * grad;
  m = fma(V(k.beta1), m, k.one_minus_beta1 * g);
  v = fma(V(k.beta2), v, (k.one_minus_beta2 * g) * g);
  const V m_hat = m * k.inv_correction1;
  const V v_hat = v * k.inv_correction2;
  const V update = fma(V(k.weight_decay), param, m_hat / (sqrt(v_hat) + k.eps));
  param = fma(V(-k.lr), update, param);
}

// Elements per chunk of the update with a compute copy: a multiple of every native width, 256 KiB of the
// four FP32 arrays (in a core's L2 while the chunk is encoded), and not above encode's parallel
// threshold, so a chunk's encode runs on its own thread (an inactive nested region, whose cost per call
// is why chunks are not smaller).
constexpr int64_t kChunk = 1 << 14;
static_assert(kChunk <= kParallelMin);

template <class T>
void adamw_kernel(T* params, const T* grads, T* m, T* v, int64_t n, const AdamWArgs& a) {
  using V = stdx::native_simd<T>;
  constexpr int64_t kWidth = static_cast<int64_t>(V::size());
  static_assert(kChunk % kWidth == 0);
  const AdamWConstants<T> k(a);
  const int64_t vectors = n / kWidth;
  // Elements [begin, end): whole vectors from begin (a multiple of kWidth), then scalars. Every range
  // ends at a multiple of kWidth but the last, so the scalars are the tensor's tail past its last vector.
  auto update = [&](int64_t begin, int64_t end) {
    int64_t i = begin;
    for (; i + kWidth <= end; i += kWidth) {
      V p(params + i, stdx::element_aligned), g(grads + i, stdx::element_aligned);
      V mi(m + i, stdx::element_aligned), vi(v + i, stdx::element_aligned);
      adamw_element(p, g, mi, vi, k);
      p.copy_to(params + i, stdx::element_aligned);
      mi.copy_to(m + i, stdx::element_aligned);
      vi.copy_to(v + i, stdx::element_aligned);
    }
    for (; i < end; ++i) adamw_element(params[i], grads[i], m[i], v[i], k);
  };
  if (a.compute.empty()) {
#pragma omp parallel for schedule(static) if (n > kParallelMin)
    for (int64_t b = 0; b < vectors; ++b) update(b * kWidth, (b + 1) * kWidth);
    update(vectors * kWidth, n);
    return;
  }
  const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (n > kParallelMin)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t begin = c * kChunk, count = std::min(kChunk, n - begin);
    update(begin, begin + count);
    encode<T>(params + begin, a.compute.elements(begin, count), count, T(1), false);
  }
}

}  // namespace

void CpuBackend::adamw_update(const AdamWArgs& given) {
  // The masters and moments are F32 (F64) in every recipe; gradients may be stored narrower.
  WideOperands w(staging_, {&given.params, &given.grads, &given.m, &given.v});
  AdamWArgs args = given;
  args.grads = w.in(given.grads);
  GPT_CHECK(args.params.dtype == w.wide() && args.m.dtype == w.wide() && args.v.dtype == w.wide(),
            "adamw_update: params, m and v must be {}", dtype_name(w.wide()));
  const int64_t n = check_adamw(args);
  dispatch_float(w.wide(), [&](auto zero) {
    using T = decltype(zero);
    adamw_kernel(args.params.as<T>(), args.grads.as<T>(), args.m.as<T>(), args.v.as<T>(), n, args);
  });
}

}  // namespace gpt::cpu
