// cast, amax, quantize_roundtrip: the mixed-precision conversions. Every element goes through the exact
// scalar conversions of precision/float_formats.h, so these are the reference the CUDA kernels (which use
// the hardware's cvt instructions) must match bit for bit.
//
// Quantisation of element x with scale s: v = x * s in the input's precision; code = encode(v) without
// saturation, and when that overflowed (code magnitude kMaxCode + 1, v not NaN) it is counted and, with
// saturation (FP8 only), replaced by +-max: the same code encode(v, saturate) gives, plus the count.
// Underflow: x != 0 and the code is +-0. The amax is over the unscaled x, as Transformer Engine records it.
// Threads split the elements statically; counts and maxima reduce exactly, in any order.
#include "cpu/convert.h"
#include "backend/op_checks.h"
#include "cpu/cpu_backend.h"
#include "cpu/dispatch.h"
#include "cpu/wide_operands.h"
#include "precision/fp8_scaling.h"
#include "precision/float_formats.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace gpt::cpu {
namespace {

// Below this many elements a parallel region costs more than it saves.
constexpr int64_t kParallelMin = 1 << 14;

// Runs encode over in[0, n) and hands each code to sink(i, code).
// Saturation is an FP8 mode only: bf16 and f16 overflow to inf like IEEE (and as loss scaling needs).
template <class Fmt, class T, class Sink>
QuantStats quantize_loop(const T* in, int64_t n, T scale, bool fp8_saturate, Sink&& sink) {
  const bool saturate = fp8_saturate && sizeof(typename Fmt::Storage) == 1;
  int64_t underflow = 0, overflow = 0;
  double amax = 0.0;
  int nan = 0;
#pragma omp parallel for schedule(static) reduction(+ : underflow, overflow) reduction(max : amax) reduction(| : nan) \
    if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) {
    const T x = in[i];
    const auto code = encode_one<Fmt>(x, scale, saturate, underflow, overflow);
    if (std::isnan(x)) nan = 1;
    else amax = std::max(amax, std::abs(static_cast<double>(x)));
    sink(i, code);
  }
  return {underflow, overflow, amax, nan != 0};
}

// The FP32 round trip through a format, out[i] = decode(encode(in[i] * scale)) * scale_inv, with a fast
// path for the values that land in the format's normal range, [min normal, max]: there the format is
// FP32 with fewer mantissa bits, so round-to-nearest-even is an integer add on v's bits,
//   v + 2^(s-1) - 1 + (bit s of v), the low s bits cleared, s = 23 - mantissa bits,
// whose carry steps into the next binade as RNE does (never past max: max is representable). Zeros,
// subnormals, overflow, inf and NaN take quantize_one. Equal bit for bit to quantize_loop (tested).
template <class Fmt>
QuantStats roundtrip_f32(const float* in, float* out, int64_t n, float scale, float scale_inv, bool fp8_saturate) {
  const bool saturate = fp8_saturate && sizeof(typename Fmt::Storage) == 1;
  constexpr int kShift = 23 - Fmt::kManBits;
  constexpr uint32_t kLow = (1u << kShift) - 1;
  const uint32_t min_normal = f32_bits(Fmt::kMinNormal), max_finite = f32_bits(Fmt::kMax);
  int64_t underflow = 0, overflow = 0;
  double amax = 0.0;
  int nan = 0;
#pragma omp parallel for schedule(static) reduction(+ : underflow, overflow) reduction(max : amax) reduction(| : nan) \
    if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) {
    const float x = in[i];
    const uint32_t u = f32_bits(x * scale);
    const uint32_t magnitude = u & 0x7FFFFFFFu;
    if (magnitude >= min_normal && magnitude <= max_finite) {
      out[i] = f32_from_bits((u + (kLow >> 1) + ((u >> kShift) & 1u)) & ~kLow) * scale_inv;
      amax = std::max(amax, std::abs(static_cast<double>(x)));
      continue;
    }
    const auto code = encode_one<Fmt>(x, scale, saturate, underflow, overflow);
    if (std::isnan(x)) nan = 1;
    else amax = std::max(amax, std::abs(static_cast<double>(x)));
    out[i] = Fmt::decode(code) * scale_inv;
  }
  return {underflow, overflow, amax, nan != 0};
}

// out[0] = amax, or max(out[0], amax) with accumulate; NaN wins either way.
void store_amax(const Tensor& out, double amax, bool nan, bool accumulate) {
  dispatch_float(out.dtype, [&]<class T>(T) {
    T* p = out.as<T>();
    const T value = nan ? std::numeric_limits<T>::quiet_NaN() : static_cast<T>(amax);
    if (!accumulate || std::isnan(value)) p[0] = value;
    else if (!std::isnan(p[0])) p[0] = std::max(p[0], value);
  });
}

void store_stats(const QuantStats& stats, const Tensor& amax, const Tensor& counts) {
  if (!amax.empty()) store_amax(amax, stats.amax, stats.nan, true);
  if (!counts.empty()) {
    int32_t* c = counts.i32();
    c[0] = static_cast<int32_t>(c[0] + stats.underflow);
    c[1] = static_cast<int32_t>(c[1] + stats.overflow);
  }
}

template <class Fmt, class T>
void dequantize_kernel(T* out, const typename Fmt::Storage* in, int64_t n, T scale_inv) {
#pragma omp parallel for schedule(static) if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<T>(Fmt::decode(in[i])) * scale_inv;
}

template <class From, class To>
void convert_kernel(To* out, const From* in, int64_t n) {
#pragma omp parallel for schedule(static) if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<To>(in[i]);
}

}  // namespace

void CpuBackend::cast(const CastArgs& args) {
  const Tensor& in = args.in;
  const Tensor& out = args.out;
  check_cast(args);
  const int64_t n = in.numel();

  // Through a scaling state, between two narrow formats, or a plain rounding without statistics: convert.h's
  // encoders (with their fast paths). An explicit scale or statistics take the reference loop below.
  const bool plain = args.scale == 1.0f && args.amax.empty() && args.counts.empty() && is_narrow_float(out.dtype);
  if (plain || in.scaling || out.scaling || (is_narrow_float(in.dtype) && is_narrow_float(out.dtype))) {
    GPT_CHECK(args.scale == 1.0f && args.amax.empty() && args.counts.empty(),
              "cast: with an FP8 scaling state the state gives scale, amax and counts (got scale {}{}{})", args.scale,
              args.amax.empty() ? "" : ", amax", args.counts.empty() ? "" : ", counts");
    WideOperands w(staging_, {&in, &out});
    const Tensor x = w.in(in);
    Fp8Meta* meta = is_narrow_float(out.dtype) ? out.scaling : nullptr;
    QuantStats stats;
    dispatch_float(w.wide(), [&]<class T>(T) {
      stats = encode<T>(x.as<T>(), out, n, static_cast<T>(meta ? meta->scale : 1.0f), args.saturate);
    });
    if (meta) add_stats(*meta, stats);
    return;
  }

  if (is_wide_float(in.dtype) && is_narrow_float(out.dtype)) {
    check_stats_outputs(args.amax, args.counts, "cast");
    QuantStats stats;
    dispatch_float(in.dtype, [&]<class T>(T) {
      dispatch_format(out.dtype, [&]<class Fmt>(Fmt) {
        auto* codes = out.as<typename Fmt::Storage>();
        stats = quantize_loop<Fmt>(in.as<T>(), n, static_cast<T>(args.scale), args.saturate,
                                   [codes](int64_t i, typename Fmt::Storage code) { codes[i] = code; });
      });
    });
    store_stats(stats, args.amax, args.counts);
    return;
  }
  GPT_CHECK(args.amax.empty() && args.counts.empty(), "cast: amax and counts are outputs of a quantising cast only ({} -> {})",
            dtype_name(in.dtype), dtype_name(out.dtype));
  if (is_narrow_float(in.dtype) && is_wide_float(out.dtype)) {
    dispatch_float(out.dtype, [&]<class T>(T) {
      dispatch_format(in.dtype, [&]<class Fmt>(Fmt) {
        dequantize_kernel<Fmt>(out.as<T>(), in.as<typename Fmt::Storage>(), n, T(1) / static_cast<T>(args.scale));
      });
    });
    return;
  }
  GPT_CHECK(is_wide_float(in.dtype) && is_wide_float(out.dtype),
            "cast: no conversion from {} to {}; narrow formats convert to and from f32 or f64", dtype_name(in.dtype),
            dtype_name(out.dtype));
  GPT_CHECK(args.scale == 1.0f, "cast: a {} -> {} conversion takes no scale (got {})", dtype_name(in.dtype),
            dtype_name(out.dtype), args.scale);
  dispatch_float(in.dtype, [&]<class From>(From) {
    dispatch_float(out.dtype, [&]<class To>(To) { convert_kernel(out.as<To>(), in.as<From>(), n); });
  });
}

void CpuBackend::fp8_current_scale(const Fp8CurrentScaleArgs& args) {
  check_fp8_current_scale(args);
  float amax_value = 0.0f;
  const Tensor out(&amax_value, {1}, DType::F32);
  amax({out, args.in, false});
  Fp8Meta& m = *args.scaling;
  m.scale = fp8_scale_from_amax(amax_value, float_format_max(args.format), args.margin, m.scale);
  m.scale_inv = 1.0f / m.scale;
}

void CpuBackend::amax(const AmaxArgs& args) {
  check_amax(args);
  const int64_t n = args.in.numel();
  double amax = 0.0;
  int nan = 0;
  auto reduce = [&](auto value_at) {
#pragma omp parallel for schedule(static) reduction(max : amax) reduction(| : nan) if (n > kParallelMin)
    for (int64_t i = 0; i < n; ++i) {
      const double x = value_at(i);
      if (std::isnan(x)) nan = 1;
      else amax = std::max(amax, std::abs(x));
    }
  };
  if (is_wide_float(args.in.dtype)) {
    dispatch_float(args.in.dtype, [&]<class T>(T) {
      const T* p = args.in.as<T>();
      reduce([p](int64_t i) { return static_cast<double>(p[i]); });
    });
  } else {
    dispatch_format(args.in.dtype, [&]<class Fmt>(Fmt) {
      const auto* p = args.in.as<typename Fmt::Storage>();
      reduce([p](int64_t i) { return static_cast<double>(Fmt::decode(p[i])); });
    });
  }
  store_amax(args.out, amax, nan != 0, args.accumulate);
}

// BF16 round trip of FP32 values, the mixed-precision recipes' most frequent op (every activation):
// BF16 is FP32's top 16 bits, so round-to-nearest-even is one integer add on the bits,
//   u + 0x7FFF + (bit 16 of u), then the low 16 bits cleared,
// which carries into the exponent exactly as RNE rounds up to the next binade (and to inf past the
// largest BF16); subnormals need no special case, the exponent field being FP32's. NaN would carry into
// the sign, so it becomes the canonical NaN as Bf16Format::encode gives it. Branch-free, so it vectorises;
// equal bit for bit to the scalar path (tested).
namespace {

void bf16_roundtrip_f32(const float* in, float* out, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t u = f32_bits(in[i]);
    const uint32_t rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u;
    const bool nan = (u & 0x7FFFFFFFu) > 0x7F800000u;
    out[i] = f32_from_bits(nan ? static_cast<uint32_t>(Bf16Format::kCanonicalNaN) << 16 : rounded);
  }
}

}  // namespace

void CpuBackend::quantize_roundtrip(const QuantizeRoundtripArgs& args) {
  const Tensor& in = args.in;
  const Tensor& out = args.out;
  check_quantize_roundtrip(args);
  if (args.format == DType::BF16 && in.dtype == DType::F32 && args.scale == 1.0f && args.amax.empty() &&
      args.counts.empty()) {
    bf16_roundtrip_f32(in.f32(), out.f32(), in.numel());
    return;
  }
  QuantStats stats;
  if (in.dtype == DType::F32) {
    dispatch_format(args.format, [&]<class Fmt>(Fmt) {
      const float scale_inv = args.dequantize ? 1.0f / args.scale : 1.0f;
      stats = roundtrip_f32<Fmt>(in.f32(), out.f32(), in.numel(), args.scale, scale_inv, args.saturate);
    });
    store_stats(stats, args.amax, args.counts);
    return;
  }
  dispatch_float(in.dtype, [&]<class T>(T) {
    dispatch_format(args.format, [&]<class Fmt>(Fmt) {
      T* values = out.as<T>();
      const T scale_inv = args.dequantize ? T(1) / static_cast<T>(args.scale) : T(1);
      stats = quantize_loop<Fmt>(in.as<T>(), in.numel(), static_cast<T>(args.scale), args.saturate,
                                 [values, scale_inv](int64_t i, typename Fmt::Storage code) {
                                   values[i] = static_cast<T>(Fmt::decode(code)) * scale_inv;
                                 });
    });
  });
  store_stats(stats, args.amax, args.counts);
}

}  // namespace gpt::cpu
