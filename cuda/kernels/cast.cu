// Format conversions, amax, fake quantisation and current FP8 scaling (src/cpu/cast.cpp and
// src/cpu/convert.* are the references, bit for bit: the same float_formats.h rounding functions, the
// same multiplies in the same precision).
//
// Every op here is one pass of convert_kernel over the flat elements, then, when it keeps statistics, a
// one-warp pass that combines the blocks' statistics and applies them where they go:
//   x    = decode(in[i]) (exact) [* in_factor]       in W: double when a tensor is F64, else FP32;
//                                                    narrow in only: 1, 1/scale (dequantise), or an FP8 in's
//                                                    scaling->scale_inv (read on the device)
//   cast (Sink::Codes)      out[i] = encode(x * out_scale), out_scale = scale or out.scaling->scale
//   cast (Sink::Wide)       out[i] = x rounded to out's F32/F64
//   quantize_roundtrip      out[i] = W(decode(encode(x * scale))) * (1/scale, or 1 without dequantize)
//   amax, fp8_current_scale nothing stored
// encode is cpu/convert.h's encode_one: a code that overflowed (magnitude kMaxCode + 1, x * scale not
// NaN) is counted and, saturating (FP8 only), becomes +-max; a nonzero x stored as +-0 is an underflow.
// Statistics: amax = max |x| in double (NaN once an x is NaN), underflow and overflow counts. Each
// thread tallies its elements, block_reduce combines the block's threads (max, or, integer sums: exact
// in any order), pass 2 combines the blocks and then does what the CPU does with its one QuantStats:
// add_stats into an FP8 out's scaling state; or the running amax [1] (f32/f64) and counts [2] (i32) of
// CastArgs/QuantizeRoundtripArgs; or AmaxArgs' out; or, for fp8_current_scale, scale =
// fp8_scale_from_amax(amax, format max, margin, previous scale) and scale_inv = 1/scale written into
// the Fp8Meta in device memory, so the cast that follows reads its scale without a trip to the host.
// The block partials live in ctx.scratch (at most kMaxBlocks of them).
//
// Layout: flat, contiguous. Each thread takes units of 8 consecutive elements, one 128-bit access per
// 2-byte tensor (two for F32, four for F64, 8 bytes for FP8) when both pointers are aligned
// (vector_access.cuh), scalar otherwise and for the tail; grid-stride. out may alias in (element i is
// read and written by one thread).
#include "kernels/cast.h"

#include "backend/op_checks.h"
#include "common/block_reduce.cuh"
#include "common/launch.cuh"
#include "common/vector_access.cuh"
#include "precision/fp8_scale_rule.h"

#include <algorithm>
#include <cmath>
#include <type_traits>

namespace gpt::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxBlocks = 1024;

enum class Sink { None, Wide, Codes, Roundtrip };

struct BlockStats {
  double amax;
  unsigned long long underflow;
  unsigned long long overflow;
  int nan;
};

template <class W>
struct ConvertParams {
  TensorRef in, out;
  int64_t n = 0;
  W in_factor = 1;                   // multiplies every decoded narrow input
  bool in_factor_from_meta = false;  // in.scaling->scale_inv instead (an FP8 in with scaling state)
  W out_scale = 1;                   // multiplies x before it is encoded
  bool out_scale_from_meta = false;  // out.scaling->scale instead
  W roundtrip_factor = 1;            // Sink::Roundtrip: multiplies the decoded code
  bool saturate = true;              // FP8 codes only: the launcher folds the format in
  bool vector = false;
  BlockStats* partials = nullptr;    // null: no statistics
};

// Element i of t, exactly, in W (F64 data needs W = double).
template <class W>
__device__ __forceinline__ W load_exact(const TensorRef& t, int64_t i) {
  if (t.dtype == DType::F64) return static_cast<W>(static_cast<const double*>(t.data)[i]);
  return static_cast<W>(load(t, i));
}

// x rounded to t's F32 or F64.
template <class W>
__device__ __forceinline__ void store_wide(const TensorRef& t, int64_t i, int count, bool vector, const W (&x)[kPack]) {
  if (t.dtype == DType::F64) {
    double d[kPack];
    for (int k = 0; k < kPack; ++k) d[k] = static_cast<double>(x[k]);
    if (vector && count == kPack) store_codes(static_cast<double*>(t.data) + i, d);
    else for (int k = 0; k < count; ++k) static_cast<double*>(t.data)[i + k] = d[k];
  } else {
    float f[kPack];
    for (int k = 0; k < kPack; ++k) f[k] = static_cast<float>(x[k]);
    if (vector && count == kPack) store_codes(static_cast<float*>(t.data) + i, f);
    else for (int k = 0; k < count; ++k) static_cast<float*>(t.data)[i + k] = f[k];
  }
}

// cpu/convert.h's encode_one, counting into s.
template <class Fmt, class W>
__device__ __forceinline__ typename Fmt::Storage encode_one(W x, W scale, bool saturate, BlockStats& s) {
  using Storage = typename Fmt::Storage;
  const W v = x * scale;
  Storage code = Fmt::encode(v, false);
  const auto magnitude = static_cast<Storage>(code & ~Fmt::kSignMask);
  if (magnitude == Fmt::kMaxCode + 1 && !(v != v)) {
    ++s.overflow;
    if (saturate) code = static_cast<Storage>((code & Fmt::kSignMask) | Fmt::kMaxCode);
  } else if (magnitude == 0 && x != W(0)) {
    ++s.underflow;
  }
  return code;
}

template <class W, class Fmt, Sink kSink>
__global__ void __launch_bounds__(kThreads) convert_kernel(ConvertParams<W> p) {
  using Storage = typename Fmt::Storage;
  const W in_factor = p.in_factor_from_meta ? static_cast<W>(p.in.scaling->scale_inv) : p.in_factor;
  const W out_scale = p.out_scale_from_meta ? static_cast<W>(p.out.scaling->scale) : p.out_scale;
  const bool stats = p.partials != nullptr;
  const bool narrow_in = is_narrow_float(p.in.dtype);
  BlockStats s{0.0, 0, 0, 0};
  for (int64_t i = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) * kPack; i < p.n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x * kPack) {
    const int count = static_cast<int>(std::min<int64_t>(kPack, p.n - i));
    W x[kPack];
    if (p.vector && count == kPack) load_pack(p.in, i, x);
    else for (int k = 0; k < kPack; ++k) x[k] = k < count ? load_exact<W>(p.in, i + k) : W(0);
    // A narrow input is always multiplied, as the CPU decodes it (a BF16 signalling NaN comes out quiet).
    if (narrow_in)
      for (int k = 0; k < kPack; ++k) x[k] *= in_factor;
    if (stats) {
      for (int k = 0; k < count; ++k) {
        if (x[k] != x[k]) s.nan = 1;
        else s.amax = fmax(s.amax, fabs(static_cast<double>(x[k])));
      }
    }
    if constexpr (kSink == Sink::Wide) {
      store_wide(p.out, i, count, p.vector, x);
    } else if constexpr (kSink == Sink::Codes || kSink == Sink::Roundtrip) {
      Storage c[kPack];
      for (int k = 0; k < kPack; ++k) c[k] = encode_one<Fmt>(x[k], out_scale, p.saturate, s);
      if constexpr (kSink == Sink::Codes) {
        if (p.vector && count == kPack) store_codes(static_cast<Storage*>(p.out.data) + i, c);
        else for (int k = 0; k < count; ++k) static_cast<Storage*>(p.out.data)[i + k] = c[k];
      } else {
        for (int k = 0; k < kPack; ++k) x[k] = static_cast<W>(Fmt::decode(c[k])) * p.roundtrip_factor;
        store_wide(p.out, i, count, p.vector, x);
      }
    }
  }
  if (!stats) return;
  // The padding entries past count (x = 0) were encoded too: zero is neither an underflow nor an
  // overflow, so they count nothing.
  BlockStats b;
  b.amax = block_reduce(s.amax, MaxOp{}, 0.0);
  b.nan = block_reduce(s.nan, OrOp{}, 0);
  b.underflow = block_reduce(s.underflow, SumOp{}, 0ull);
  b.overflow = block_reduce(s.overflow, SumOp{}, 0ull);
  if (threadIdx.x == 0) p.partials[blockIdx.x] = b;
}

// Where pass 2 puts the statistics: one of the three forms.
struct StatsTarget {
  Fp8Meta* meta = nullptr;          // add_stats into an FP8 tensor's scaling state
  void* amax = nullptr;             // a running (or, without accumulate, fresh) amax [1]
  DType amax_dtype = DType::F32;
  bool amax_accumulate = true;
  int32_t* counts = nullptr;        // running counts [2]: underflows, overflows
  Fp8Meta* current_scale = nullptr; // fp8_current_scale: the state whose scale the amax sets
  float fp8_max = 0.0f;
  int margin = 0;
};

template <class T>
__device__ __forceinline__ T quiet_nan() {
  return static_cast<T>(f32_from_bits(0x7FC00000u));
}

// cpu/cast.cpp's store_amax: NaN wins, else the running max.
template <class T>
__device__ __forceinline__ void store_amax(T* p, double amax, bool nan, bool accumulate) {
  const T value = nan ? quiet_nan<T>() : static_cast<T>(amax);
  if (!accumulate || value != value) *p = value;
  else if (!(*p != *p)) *p = *p < value ? value : *p;
}

// One warp: lane l combines partials l, l+32, ...; then the warp's butterfly.
__global__ void __launch_bounds__(32) apply_stats(const BlockStats* partials, int blocks, StatsTarget t) {
  double amax = 0.0;
  int nan = 0;
  unsigned long long underflow = 0, overflow = 0;
  for (int b = threadIdx.x; b < blocks; b += blockDim.x) {
    amax = fmax(amax, partials[b].amax);
    nan |= partials[b].nan;
    underflow += partials[b].underflow;
    overflow += partials[b].overflow;
  }
  amax = warp_reduce(amax, MaxOp{});
  nan = warp_reduce(nan, OrOp{});
  underflow = warp_reduce(underflow, SumOp{});
  overflow = warp_reduce(overflow, SumOp{});
  if (threadIdx.x != 0) return;
  if (Fp8Meta* m = t.meta) {
    // cpu/convert.cpp's add_stats.
    if (nan) m->amax = quiet_nan<float>();
    else if (!(m->amax != m->amax)) m->amax = m->amax < static_cast<float>(amax) ? static_cast<float>(amax) : m->amax;
    m->underflows = static_cast<int32_t>(m->underflows + static_cast<int64_t>(underflow));
    m->saturated = static_cast<int32_t>(m->saturated + static_cast<int64_t>(overflow));
  }
  if (t.amax) {
    if (t.amax_dtype == DType::F64) store_amax(static_cast<double*>(t.amax), amax, nan, t.amax_accumulate);
    else store_amax(static_cast<float*>(t.amax), amax, nan, t.amax_accumulate);
  }
  if (t.counts) {
    t.counts[0] = static_cast<int32_t>(t.counts[0] + static_cast<int64_t>(underflow));
    t.counts[1] = static_cast<int32_t>(t.counts[1] + static_cast<int64_t>(overflow));
  }
  if (Fp8Meta* m = t.current_scale) {
    const float amax_value = nan ? quiet_nan<float>() : static_cast<float>(amax);
    m->scale = fp8_scale_from_amax(amax_value, t.fp8_max, t.margin, m->scale);
    m->scale_inv = 1.0f / m->scale;
  }
}

bool is_wide(DType t) { return t == DType::F32 || t == DType::F64; }

template <class W, Sink kSink>
void launch_convert(DType format, ConvertParams<W> p, const StatsTarget* target, const DeviceContext& ctx) {
  const int blocks = pack_grid(p.n, kThreads, kMaxBlocks);
  if (target) {
    GPT_CHECK(blocks * sizeof(BlockStats) <= ctx.scratch_bytes,
              "cast: {} blocks' statistics need {} bytes of scratch, the backend has {}", blocks,
              blocks * sizeof(BlockStats), ctx.scratch_bytes);
    p.partials = static_cast<BlockStats*>(ctx.scratch);
  }
  const dim3 grid(blocks), block(kThreads);
  if constexpr (kSink == Sink::Wide || kSink == Sink::None) {
    // No narrow side: one instantiation, whose format argument is a placeholder.
    launch<convert_kernel<W, Bf16Format, kSink>>(grid, block, 0, ctx.stream, p);
  } else {
    const bool launched = visit_float_format(format, [&](auto fmt) {
      launch<convert_kernel<W, decltype(fmt), kSink>>(grid, block, 0, ctx.stream, p);
    });
    GPT_CHECK(launched, "cast: {} is not a narrow float format (bf16, f16, e4m3, e5m2)", dtype_name(format));
  }
  if (target) launch<apply_stats>(dim3(1), dim3(32), 0, ctx.stream, static_cast<const BlockStats*>(p.partials), blocks, *target);
}

// The format argument of a conversion without a narrow side (Sink::Wide, Sink::None): unused.
constexpr DType kNoFormat = DType::BF16;

template <class W>
ConvertParams<W> params(const Tensor& in, const Tensor& out) {
  ConvertParams<W> p;
  p.in = tensor_ref(in);
  p.out = tensor_ref(out);
  p.n = in.numel();
  p.vector = pack_aligned(in) && pack_aligned(out);
  return p;
}

// The target of a quantise's optional amax and counts; null when neither is asked for.
bool stats_target(const Tensor& amax, const Tensor& counts, const char* op, StatsTarget& t) {
  check_stats_outputs(amax, counts, op);
  if (!amax.empty()) {
    t.amax = amax.data;
    t.amax_dtype = amax.dtype;
  }
  if (!counts.empty()) t.counts = counts.i32();
  return t.amax || t.counts;
}

template <class W>
void cast_through_state(const CastArgs& args, const DeviceContext& ctx) {
  const Tensor &in = args.in, &out = args.out;
  ConvertParams<W> p = params<W>(in, out);
  p.in_factor_from_meta = is_fp8(in.dtype) && in.scaling;
  if (is_wide(out.dtype)) {
    launch_convert<W, Sink::Wide>(kNoFormat, p, nullptr, ctx);
    return;
  }
  p.out_scale_from_meta = is_fp8(out.dtype) && out.scaling;
  p.saturate = args.saturate && is_fp8(out.dtype);
  StatsTarget target;
  target.meta = p.out_scale_from_meta ? out.scaling : nullptr;
  launch_convert<W, Sink::Codes>(out.dtype, p, target.meta ? &target : nullptr, ctx);
}

template <class W>
void quantise(const CastArgs& args, const DeviceContext& ctx) {
  ConvertParams<W> p = params<W>(args.in, args.out);
  p.out_scale = static_cast<W>(args.scale);
  p.saturate = args.saturate && is_fp8(args.out.dtype);
  StatsTarget target;
  const bool stats = stats_target(args.amax, args.counts, "cast", target);
  launch_convert<W, Sink::Codes>(args.out.dtype, p, stats ? &target : nullptr, ctx);
}

template <class W>
void dequantise(const CastArgs& args, const DeviceContext& ctx) {
  ConvertParams<W> p = params<W>(args.in, args.out);
  p.in_factor = W(1) / static_cast<W>(args.scale);
  launch_convert<W, Sink::Wide>(kNoFormat, p, nullptr, ctx);
}

template <class Fn>
void with_wide(bool f64, Fn&& fn) {
  if (f64) fn(double{});
  else fn(float{});
}

}  // namespace

void cast(const CastArgs& args, const DeviceContext& ctx) {
  const Tensor& in = args.in;
  const Tensor& out = args.out;
  check_cast(args);
  const bool f64 = in.dtype == DType::F64 || out.dtype == DType::F64;
  const bool has_stats = !args.amax.empty() || !args.counts.empty();

  // The forms and their order are cpu/cast.cpp's.
  const bool plain = args.scale == 1.0f && !has_stats && is_narrow_float(out.dtype);
  if (plain || in.scaling || out.scaling || (is_narrow_float(in.dtype) && is_narrow_float(out.dtype))) {
    GPT_CHECK(args.scale == 1.0f && !has_stats,
              "cast: with an FP8 scaling state the state gives scale, amax and counts (got scale {}{}{})", args.scale,
              args.amax.empty() ? "" : ", amax", args.counts.empty() ? "" : ", counts");
    GPT_CHECK((is_wide(in.dtype) || is_narrow_float(in.dtype)) && (is_wide(out.dtype) || is_narrow_float(out.dtype)),
              "cast: no conversion from {} to {}", dtype_name(in.dtype), dtype_name(out.dtype));
    if (in.numel() == 0) return;
    with_wide(f64, [&](auto w) { cast_through_state<decltype(w)>(args, ctx); });
    return;
  }
  if (is_wide(in.dtype) && is_narrow_float(out.dtype)) {
    with_wide(f64, [&](auto w) { quantise<decltype(w)>(args, ctx); });
    return;
  }
  GPT_CHECK(!has_stats, "cast: amax and counts are outputs of a quantising cast only ({} -> {})", dtype_name(in.dtype),
            dtype_name(out.dtype));
  if (in.numel() == 0) return;
  if (is_narrow_float(in.dtype) && is_wide(out.dtype)) {
    with_wide(f64, [&](auto w) { dequantise<decltype(w)>(args, ctx); });
    return;
  }
  GPT_CHECK(is_wide(in.dtype) && is_wide(out.dtype),
            "cast: no conversion from {} to {}; narrow formats convert to and from f32 or f64", dtype_name(in.dtype),
            dtype_name(out.dtype));
  GPT_CHECK(args.scale == 1.0f, "cast: a {} -> {} conversion takes no scale (got {})", dtype_name(in.dtype),
            dtype_name(out.dtype), args.scale);
  with_wide(f64, [&](auto w) {
    using W = decltype(w);
    launch_convert<W, Sink::Wide>(kNoFormat, params<W>(in, out), nullptr, ctx);
  });
}

void amax(const AmaxArgs& args, const DeviceContext& ctx) {
  check_amax(args);
  GPT_CHECK(is_wide(args.in.dtype) || is_narrow_float(args.in.dtype), "amax: in must be a float tensor, got {}",
            dtype_name(args.in.dtype));
  StatsTarget target;
  target.amax = args.out.data;
  target.amax_dtype = args.out.dtype;
  target.amax_accumulate = args.accumulate;
  // The codes' values, as the CPU's amax reads them: an FP8 tensor's scale_inv is not applied.
  with_wide(args.in.dtype == DType::F64, [&](auto w) {
    using W = decltype(w);
    launch_convert<W, Sink::None>(kNoFormat, params<W>(args.in, args.in), &target, ctx);
  });
}

void quantize_roundtrip(const QuantizeRoundtripArgs& args, const DeviceContext& ctx) {
  const Tensor& in = args.in;
  const Tensor& out = args.out;
  check_quantize_roundtrip(args);
  GPT_CHECK(is_narrow_float(args.format), "quantize_roundtrip: format must be bf16, f16, e4m3 or e5m2, got {}",
            dtype_name(args.format));
  StatsTarget target;
  const bool stats = stats_target(args.amax, args.counts, "quantize_roundtrip", target);
  if (in.numel() == 0 && !stats) return;
  with_wide(in.dtype == DType::F64, [&](auto w) {
    using W = decltype(w);
    ConvertParams<W> p = params<W>(in, out);
    p.out_scale = static_cast<W>(args.scale);
    p.roundtrip_factor = args.dequantize ? W(1) / static_cast<W>(args.scale) : W(1);
    p.saturate = args.saturate && is_fp8(args.format);
    launch_convert<W, Sink::Roundtrip>(args.format, p, stats ? &target : nullptr, ctx);
  });
}

void fp8_current_scale(const Fp8CurrentScaleArgs& args, const DeviceContext& ctx) {
  check_fp8_current_scale(args);
  GPT_CHECK(is_wide(args.in.dtype) || is_narrow_float(args.in.dtype), "fp8_current_scale: in must be a float tensor, got {}",
            dtype_name(args.in.dtype));
  StatsTarget target;
  target.current_scale = args.scaling;
  target.fp8_max = float_format_max(args.format);
  target.margin = args.margin;
  with_wide(args.in.dtype == DType::F64, [&](auto w) {
    using W = decltype(w);
    launch_convert<W, Sink::None>(kNoFormat, params<W>(args.in, args.in), &target, ctx);
  });
}

}  // namespace gpt::cuda
