// Op table cases of cast, amax, quantize_roundtrip and fp8_current_scale (cuda/kernels/cast.cu): every
// form of CastArgs, every format, odd sizes and an unaligned view (the scalar path), scales that saturate
// and scales that underflow (so the counts are exercised), amax and counts present and absent, the
// scaling-state form with its statistics, NaN and inf inputs of amax. The conversions are bit exact, so
// the table's tolerance is not what these cases lean on: the FP8 states' counts and amaxes and every
// code must agree (the i32 counts are compared exactly).
#include "cuda/backend/op_table.h"

#include "precision/float_formats.h"

namespace gpt::test {
namespace {

constexpr DType kNarrow[] = {DType::BF16, DType::F16, DType::E4M3, DType::E5M2};

// Inputs of the quantising cases are uniform in [-kRange, kRange].
constexpr float kRange = 2.0f;

// A scale under which a good share of [-2, 2] rounds above the format's max (inf, or saturated), and one
// under which a good share rounds to zero.
float saturating_scale(DType f) {
  switch (f) {
    case DType::BF16: return 3e38f;
    case DType::F16: return 1e5f;
    case DType::E4M3: return 600.0f;
    default: return 1e5f;
  }
}
float underflowing_scale(DType f) {
  switch (f) {
    case DType::BF16: return 1e-38f;
    case DType::F16: return 1e-7f;
    case DType::E4M3: return 2e-3f;
    default: return 2e-5f;
  }
}

struct Shape {
  const char* tag;
  std::initializer_list<int64_t> dims;
};
// One element, several blocks with a tail that is not a whole pack, a matrix. (The ops are flat, so a
// second 1-D size with a tail would repeat n4099's paths; the table runs each case as its own process
// under ctest, and these families have the most cases.)
const Shape kShapes[] = {{"n1", {1}}, {"n4099", {4099}}, {"67x200", {67, 200}}};

std::vector<OpCase> cast_cases() {
  std::vector<OpCase> out;
  const std::pair<const char*, float (*)(DType)> scales[] = {{"sat", saturating_scale}, {"under", underflowing_scale}};
  // Quantise with an explicit scale, with and without the running amax and counts.
  for (DType wide : {DType::F32, DType::F64}) {
    for (DType f : kNarrow) {
      for (const Shape& s : kShapes) {
        for (const auto& [scale_tag, scale_of] : scales) {
          for (bool stats : {false, true}) {
            const float scale = scale_of(f);
            const auto dims = s.dims;
            out.push_back({fmt::format("cast/quantise/{}-{}/{}/{}/{}", format_tag(wide), format_tag(f), s.tag, scale_tag,
                                       stats ? "stats" : "nostats"),
                           [=](OpBench& b) {
                             CastArgs a;
                             a.in = b.input(dims, wide, -kRange, kRange);
                             a.out = b.output(dims, f);
                             a.scale = scale;
                             if (stats) {
                               a.amax = b.accumulated({1}, wide, 0.0f, 0.5f);
                               a.counts = b.output({2}, DType::I32);  // poisoned: -1, -1, then the totals add
                             }
                             b.backend().cast(a);
                           }});
          }
        }
      }
      // Without saturation: FP8 overflows to NaN (e4m3) or inf (e5m2), still counted.
      out.push_back({fmt::format("cast/quantise/{}-{}/n4099/sat/nosaturate", format_tag(wide), format_tag(f)),
                     [=](OpBench& b) {
                       CastArgs a;
                       a.in = b.input({4099}, wide, -kRange, kRange);
                       a.out = b.output({4099}, f);
                       a.scale = saturating_scale(f);
                       a.saturate = false;
                       a.counts = b.output({2}, DType::I32);
                       b.backend().cast(a);
                     }});
      // Plain rounding (scale 1, no statistics) and dequantisation with and without a scale.
      for (const Shape& s : kShapes) {
        const auto dims = s.dims;
        out.push_back({fmt::format("cast/round/{}-{}/{}", format_tag(wide), format_tag(f), s.tag), [=](OpBench& b) {
                         b.backend().cast({b.output(dims, f), b.input(dims, wide, -kRange, kRange)});
                       }});
        for (float scale : {1.0f, 48.0f}) {
          out.push_back({fmt::format("cast/dequantise/{}-{}/{}/scale{}", format_tag(f), format_tag(wide), s.tag, scale),
                         [=](OpBench& b) {
                           CastArgs a;
                           a.in = b.input(dims, f);
                           a.out = b.output(dims, wide);
                           a.scale = scale;
                           b.backend().cast(a);
                         }});
        }
      }
    }
  }
  for (const Shape& s : kShapes) {
    const auto dims = s.dims;
    out.push_back({fmt::format("cast/f32-f64/{}", s.tag),
                   [=](OpBench& b) { b.backend().cast({b.output(dims, DType::F64), b.input(dims, DType::F32)}); }});
    out.push_back({fmt::format("cast/f64-f32/{}", s.tag),
                   [=](OpBench& b) { b.backend().cast({b.output(dims, DType::F32), b.input(dims, DType::F64)}); }});
  }
  // The scaling-state form: an FP8 out stores with its state's scale and adds to its statistics; an FP8
  // in reads times its scale_inv; any format to any other.
  for (DType fp8 : {DType::E4M3, DType::E5M2}) {
    for (DType from : {DType::F32, DType::F64, DType::BF16, DType::F16}) {
      for (const auto& [scale_tag, scale_of] : scales) {
        for (const Shape& s : kShapes) {
          const auto dims = s.dims;
          const float scale = scale_of(fp8);
          out.push_back({fmt::format("cast/state/{}-{}/{}/{}", format_tag(from), format_tag(fp8), s.tag, scale_tag),
                         [=](OpBench& b) {
                           Tensor in = b.input(dims, from, -kRange, kRange);
                           Tensor o = b.output(dims, fp8);
                           o.scaling = b.fp8_meta(scale);
                           b.backend().cast({o, in});
                         }});
        }
      }
    }
    for (DType to : {DType::F32, DType::F64, DType::BF16, DType::F16, DType::E4M3, DType::E5M2}) {
      for (const Shape& s : kShapes) {
        const auto dims = s.dims;
        out.push_back({fmt::format("cast/state/{}-{}/{}/read", format_tag(fp8), format_tag(to), s.tag), [=](OpBench& b) {
                         Tensor in = b.input(dims, fp8);
                         in.scaling = b.fp8_meta(0.25f);
                         Tensor o = b.output(dims, to);
                         if (to == DType::E4M3 || to == DType::E5M2) o.scaling = b.fp8_meta(8.0f);
                         b.backend().cast({o, in});
                       }});
      }
    }
  }
  // Unaligned views (element 1 on): the scalar path of every tensor.
  for (DType f : kNarrow) {
    out.push_back({fmt::format("cast/quantise/f32-{}/unaligned/stats", format_tag(f)), [=](OpBench& b) {
                     Tensor in = b.input({4099}, DType::F32, -kRange, kRange);
                     Tensor o = b.output({4099}, f);
                     b.backend().fill({o.elements(0, 1), 0.0f});
                     CastArgs a;
                     a.in = in.elements(1, 4098);
                     a.out = o.elements(1, 4098);
                     a.scale = saturating_scale(f);
                     a.amax = b.accumulated({1}, DType::F32, 0.0f, 0.5f);
                     a.counts = b.output({2}, DType::I32);
                     b.backend().cast(a);
                   }});
  }
  return out;
}

std::vector<OpCase> amax_cases() {
  std::vector<OpCase> out;
  for (DType f : {DType::F32, DType::F64, DType::BF16, DType::F16, DType::E4M3, DType::E5M2}) {
    for (const Shape& s : kShapes) {
      for (DType out_dtype : {DType::F32, DType::F64}) {
        // Fresh, or accumulated from a start below the inputs' max (the max moves) or above it (it stays).
        for (const auto& [accumulate, start] : {std::pair{false, 0.25f}, std::pair{true, 0.25f}, std::pair{true, 3.0f}}) {
          const auto dims = s.dims;
          out.push_back({fmt::format("amax/{}/{}/out-{}/{}{}", format_tag(f), s.tag, format_tag(out_dtype),
                                     accumulate ? "accumulate" : "fresh", start),
                         // Init-captures: clang under -fopenmp cannot capture a structured binding.
                         [=, accumulate = accumulate, start = start](OpBench& b) {
                           Tensor in = b.input(dims, f);
                           // The FP8 scale_inv is not applied by amax: the codes' values are its input.
                           if (f == DType::E4M3 || f == DType::E5M2) in.scaling = b.fp8_meta(4.0f);
                           b.backend().amax({b.accumulated({1}, out_dtype, start, start), in, accumulate});
                         }});
        }
      }
    }
  }
  // NaN wins: a scratch tensor (0xFF bytes, NaN) with valid values copied over its first 60 elements.
  for (bool accumulate : {false, true}) {
    out.push_back({fmt::format("amax/f32/nan/{}", accumulate ? "accumulate" : "fresh"), [=](OpBench& b) {
                     Tensor in = b.scratch({67}, DType::F32);
                     b.backend().copy({in.elements(0, 60), b.input({60}, DType::F32)});
                     b.backend().amax({b.accumulated({1}, DType::F32, 0.5f, 0.5f), in, accumulate});
                   }});
  }
  // +inf: a BF16 cast overflowing (BF16 does not saturate), then its amax, accumulated onto a NaN-free start.
  out.push_back({"amax/bf16/inf", [](OpBench& b) {
                   Tensor x = b.output({67}, DType::BF16);
                   CastArgs a;
                   a.in = b.input({67}, DType::F32, -kRange, kRange);
                   a.out = x;
                   a.scale = saturating_scale(DType::BF16);
                   b.backend().cast(a);
                   b.backend().amax({b.accumulated({1}, DType::F32, 0.5f, 0.5f), x, true});
                 }});
  return out;
}

std::vector<OpCase> roundtrip_cases() {
  std::vector<OpCase> out;
  for (DType wide : {DType::F32, DType::F64}) {
    for (DType f : kNarrow) {
      for (const Shape& s : kShapes) {
        for (float scale : {1.0f, saturating_scale(f), underflowing_scale(f)}) {
          for (bool dequantize : {true, false}) {
            const auto dims = s.dims;
            const bool stats = scale != 1.0f;
            out.push_back({fmt::format("quantize_roundtrip/{}/{}/{}/scale{}/{}", format_tag(wide), format_tag(f), s.tag,
                                       scale, dequantize ? "dequantize" : "codes"),
                           [=](OpBench& b) {
                             QuantizeRoundtripArgs a;
                             a.in = b.input(dims, wide, -kRange, kRange);
                             a.out = b.output(dims, wide);
                             a.format = f;
                             a.scale = scale;
                             a.dequantize = dequantize;
                             if (stats) {
                               a.amax = b.accumulated({1}, DType::F32, 0.0f, 0.5f);
                               a.counts = b.output({2}, DType::I32);
                             }
                             b.backend().quantize_roundtrip(a);
                           }});
          }
        }
      }
      // In place, without saturation.
      out.push_back({fmt::format("quantize_roundtrip/{}/{}/n4099/inplace/nosaturate", format_tag(wide), format_tag(f)),
                     [=](OpBench& b) {
                       QuantizeRoundtripArgs a;
                       a.in = b.accumulated({4099}, wide, -kRange, kRange);
                       a.out = a.in;
                       a.format = f;
                       a.scale = saturating_scale(f);
                       a.saturate = false;
                       a.counts = b.output({2}, DType::I32);
                       b.backend().quantize_roundtrip(a);
                     }});
    }
  }
  return out;
}

std::vector<OpCase> current_scale_cases() {
  std::vector<OpCase> out;
  for (DType fp8 : {DType::E4M3, DType::E5M2}) {
    for (DType from : {DType::F32, DType::BF16, DType::F16, DType::E4M3}) {
      for (const Shape& s : kShapes) {
        for (int margin : {0, 1}) {
          const auto dims = s.dims;
          // The scale from the input's own amax, then the cast that reads it from the state.
          out.push_back({fmt::format("fp8_current_scale/{}-{}/{}/margin{}", format_tag(from), format_tag(fp8), s.tag, margin),
                         [=](OpBench& b) {
                           Tensor in = b.input(dims, from, -kRange, kRange);
                           Fp8Meta* meta = b.fp8_meta(1.0f);
                           b.backend().fp8_current_scale({in, meta, fp8, margin});
                           Tensor o = b.output(dims, fp8);
                           o.scaling = meta;
                           b.backend().cast({o, in});
                         }});
        }
      }
    }
    // An all-zero input keeps the previous scale; a NaN one too.
    out.push_back({fmt::format("fp8_current_scale/f32-{}/zeros", format_tag(fp8)), [=](OpBench& b) {
                     Tensor in = b.scratch({67}, DType::F32);
                     b.backend().fill({in, 0.0f});
                     b.backend().fp8_current_scale({in, b.fp8_meta(3.0f), fp8, 0});
                   }});
    out.push_back({fmt::format("fp8_current_scale/f32-{}/nan", format_tag(fp8)), [=](OpBench& b) {
                     b.backend().fp8_current_scale({b.scratch({67}, DType::F32), b.fp8_meta(3.0f), fp8, 0});
                   }});
    // A tiny amax: the quotient overflows FP32 and the scale is FLT_MAX.
    out.push_back({fmt::format("fp8_current_scale/f32-{}/tiny", format_tag(fp8)), [=](OpBench& b) {
                     b.backend().fp8_current_scale({b.input({67}, DType::F32, -1e-38f, 1e-38f), b.fp8_meta(3.0f), fp8, 0});
                   }});
  }
  return out;
}

const OpCases registered_cast(cast_cases());
const OpCases registered_amax(amax_cases());
const OpCases registered_roundtrip(roundtrip_cases());
const OpCases registered_current_scale(current_scale_cases());

}  // namespace
}  // namespace gpt::test
