// Fast paths, each equal bit for bit to the scalar rules (tested against them):
//  - F32 -> BF16 without a scale: bf16_elements.h's bf16_round, branch-free, so it vectorises; it keeps
//    no statistics (they are an FP8 tensor's, and BF16 carries no scaling state).
//  - F32 -> F16/E4M3/E5M2 for values whose scaled magnitude is in [min normal, max]: there the format is
//    FP32 with fewer mantissa bits, so the same integer rounding on the FP32 bits, then the exponent
//    rebiased; everything else (zeros, subnormals, overflow, inf, NaN) takes the scalar encode.
//  - F32 <-> F16 without a scale, on a CPU with AVX-512 (the build's -march says so): vcvtps2ph and
//    vcvtph2ps, which round to nearest even with IEEE's subnormals and overflow to inf, as the scalar rule
//    does; only NaN differs (they keep its payload), so NaN lanes are set to the canonical NaN. Like BF16's,
//    the F16 store keeps no statistics.
//  - decoding F16 (elsewhere), E4M3 and E5M2 reads a table of every code's FP32 value; BF16 is a shift.
#include "cpu/convert.h"

#include "cpu/bf16_elements.h"
#include "cpu/dispatch.h"

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

namespace gpt::cpu {
namespace {

// Below this many elements a parallel region costs more than it saves. Conversions are a few operations
// per element and run around most ops of a narrow recipe, so the bar is higher than the kernels' 2^14:
// at 2^14 a tiny model's bf16 step took 4.5x the CPU time of its fp32 step (fork/join and spinning threads).
constexpr int64_t kParallelMin = 1 << 18;

#if defined(__AVX512F__)
constexpr int64_t kF16Lanes = 16;

void encode_f16(const float* in, uint16_t* codes, int64_t n) {
  const __m512 canonical_nan = _mm512_castsi512_ps(_mm512_set1_epi32(0x7FFFFFFF));  // converts to 0x7FFF
  const int64_t vectors = n / kF16Lanes;
#pragma omp parallel for schedule(static) if (n > kParallelMin)
  for (int64_t v = 0; v < vectors; ++v) {
    __m512 x = _mm512_loadu_ps(in + v * kF16Lanes);
    x = _mm512_mask_mov_ps(x, _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), canonical_nan);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(codes + v * kF16Lanes),
                        _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  for (int64_t i = vectors * kF16Lanes; i < n; ++i) codes[i] = F16Format::encode(in[i]);
}

void decode_f16(const uint16_t* codes, float* out, int64_t n) {
  const __m512 canonical_nan = _mm512_castsi512_ps(_mm512_set1_epi32(0x7FFFFFFF));
  const int64_t vectors = n / kF16Lanes;
#pragma omp parallel for schedule(static) if (n > kParallelMin)
  for (int64_t v = 0; v < vectors; ++v) {
    __m512 x = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes + v * kF16Lanes)));
    x = _mm512_mask_mov_ps(x, _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), canonical_nan);
    _mm512_storeu_ps(out + v * kF16Lanes, x);
  }
  for (int64_t i = vectors * kF16Lanes; i < n; ++i) out[i] = F16Format::decode(codes[i]);
}
#endif

template <class Fmt, class T>
QuantStats encode_format(const T* in, typename Fmt::Storage* codes, int64_t n, T scale, bool fp8_saturate) {
  using Storage = typename Fmt::Storage;
  const bool saturate = fp8_saturate && sizeof(Storage) == 1;
  int64_t underflow = 0, overflow = 0;
  double amax = 0.0;
  int nan = 0;
  if constexpr (std::is_same_v<T, float>) {
    if constexpr (std::is_same_v<Fmt, Bf16Format>) {
      if (scale == 1.0f) {
#pragma omp parallel for schedule(static) if (n > kParallelMin)
        for (int64_t i = 0; i < n; ++i) codes[i] = bf16_round(in[i]).code;
        return {};
      }
    }
#if defined(__AVX512F__)
    if constexpr (std::is_same_v<Fmt, F16Format>) {
      if (scale == 1.0f) {
        encode_f16(in, codes, n);
        return {};
      }
    }
#endif
    constexpr int kShift = 23 - Fmt::kManBits;
    constexpr uint32_t kLow = (1u << kShift) - 1;
    constexpr int kRebias = 127 - ((1 << (Fmt::kExpBits - 1)) - 1);
    const uint32_t min_normal = f32_bits(Fmt::kMinNormal), max_finite = f32_bits(Fmt::kMax);
#pragma omp parallel for schedule(static) reduction(+ : underflow, overflow) reduction(max : amax) reduction(| : nan) \
    if (n > kParallelMin)
    for (int64_t i = 0; i < n; ++i) {
      const float x = in[i];
      const uint32_t u = f32_bits(x * scale);
      const uint32_t magnitude = u & 0x7FFFFFFFu;
      if (magnitude >= min_normal && magnitude <= max_finite) {
        const uint32_t r = ((magnitude + (kLow >> 1) + ((magnitude >> kShift) & 1u)) >> kShift) -
                           (static_cast<uint32_t>(kRebias) << Fmt::kManBits);
        codes[i] = static_cast<Storage>(((u >> 31) ? Fmt::kSignMask : 0) | r);
        amax = std::max(amax, std::abs(static_cast<double>(x)));
        continue;
      }
      codes[i] = encode_one<Fmt>(x, scale, saturate, underflow, overflow);
      if (std::isnan(x)) nan = 1;
      else amax = std::max(amax, std::abs(static_cast<double>(x)));
    }
    return {underflow, overflow, amax, nan != 0};
  }
#pragma omp parallel for schedule(static) reduction(+ : underflow, overflow) reduction(max : amax) reduction(| : nan) \
    if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) {
    const T x = in[i];
    codes[i] = encode_one<Fmt>(x, scale, saturate, underflow, overflow);
    if (std::isnan(x)) nan = 1;
    else amax = std::max(amax, std::abs(static_cast<double>(x)));
  }
  return {underflow, overflow, amax, nan != 0};
}

// Every code's FP32 value, built once.
template <class Fmt>
const float* decode_table() {
  static const std::vector<float> table = [] {
    std::vector<float> t(size_t{1} << (8 * sizeof(typename Fmt::Storage)));
    for (size_t c = 0; c < t.size(); ++c) t[c] = Fmt::decode(static_cast<typename Fmt::Storage>(c));
    return t;
  }();
  return table.data();
}

}  // namespace

bool is_wide_float(DType t) { return t == DType::F32 || t == DType::F64; }

template <class T>
QuantStats encode(const T* in, const Tensor& out, int64_t n, T scale, bool saturate) {
  QuantStats stats;
  if (is_wide_float(out.dtype)) {
    GPT_CHECK(scale == T(1), "encode: a {} output takes no scale", dtype_name(out.dtype));
    dispatch_float(out.dtype, [&]<class To>(To) {
      To* o = out.as<To>();
      if (static_cast<const void*>(o) == static_cast<const void*>(in)) return;
#pragma omp parallel for schedule(static) if (n > kParallelMin)
      for (int64_t i = 0; i < n; ++i) o[i] = static_cast<To>(in[i]);
    });
    return stats;
  }
  dispatch_format(out.dtype, [&]<class Fmt>(Fmt) {
    stats = encode_format<Fmt>(in, out.as<typename Fmt::Storage>(), n, scale, saturate);
  });
  return stats;
}

template <class T>
void decode(const Tensor& in, T* out, int64_t n, T scale_inv) {
  if (is_wide_float(in.dtype)) {
    dispatch_float(in.dtype, [&]<class From>(From) {
      const From* p = in.as<From>();
      if (static_cast<const void*>(p) == static_cast<const void*>(out) && scale_inv == T(1)) return;
#pragma omp parallel for schedule(static) if (n > kParallelMin)
      for (int64_t i = 0; i < n; ++i) out[i] = static_cast<T>(p[i]) * scale_inv;
    });
    return;
  }
  if (in.dtype == DType::BF16) {
    const auto* p = in.as<uint16_t>();
#pragma omp parallel for schedule(static) if (n > kParallelMin)
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<T>(f32_from_bits(static_cast<uint32_t>(p[i]) << 16)) * scale_inv;
    return;
  }
#if defined(__AVX512F__)
  if constexpr (std::is_same_v<T, float>) {
    if (in.dtype == DType::F16 && scale_inv == 1.0f) {
      decode_f16(in.as<uint16_t>(), out, n);
      return;
    }
  }
#endif
  dispatch_format(in.dtype, [&]<class Fmt>(Fmt) {
    const float* table = decode_table<Fmt>();
    const auto* p = in.as<typename Fmt::Storage>();
    if (scale_inv == T(1)) {
#pragma omp parallel for schedule(static) if (n > kParallelMin)
      for (int64_t i = 0; i < n; ++i) out[i] = static_cast<T>(table[p[i]]);
    } else {
#pragma omp parallel for schedule(static) if (n > kParallelMin)
      for (int64_t i = 0; i < n; ++i) out[i] = static_cast<T>(table[p[i]]) * scale_inv;
    }
  });
}

template QuantStats encode<float>(const float*, const Tensor&, int64_t, float, bool);
template QuantStats encode<double>(const double*, const Tensor&, int64_t, double, bool);
template void decode<float>(const Tensor&, float*, int64_t, float);
template void decode<double>(const Tensor&, double*, int64_t, double);

void add_stats(Fp8Meta& meta, const QuantStats& stats) {
  if (stats.nan) meta.amax = std::numeric_limits<float>::quiet_NaN();
  else if (!std::isnan(meta.amax)) meta.amax = std::max(meta.amax, static_cast<float>(stats.amax));
  meta.underflows = static_cast<int32_t>(meta.underflows + stats.underflow);
  meta.saturated = static_cast<int32_t>(meta.saturated + stats.overflow);
}

}  // namespace gpt::cpu
