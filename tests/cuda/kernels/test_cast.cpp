// cuda/kernels/cast.cu on the emulator against the CPU backend, bit for bit: every code, the amax and the
// counts, for inputs that sit on the formats' edges (zeros of both signs, inf, NaN, the largest finite
// values and the ties just above them, the smallest subnormals and the ties below them) and a spread of
// magnitudes, in every form of cast, in quantize_roundtrip and in fp8_current_scale. The op table
// compares with a tolerance; these compare bytes.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <limits>
#include <optional>
#include <random>

#include "cpu/cpu_backend.h"
#include "cuda/kernels/kernel_test_util.h"
#include "kernels/cast.h"
#include "precision/float_formats.h"

namespace gpt::cuda::test {
namespace {

constexpr DType kNarrow[] = {DType::BF16, DType::F16, DType::E4M3, DType::E5M2};

bool is_fp8(DType t) { return t == DType::E4M3 || t == DType::E5M2; }

// Edge values of every format, then log-uniform magnitudes from 2^-40 to 2^40 of either sign.
std::vector<double> edge_values() {
  std::vector<double> v = {0.0, -0.0, INFINITY, -INFINITY, NAN, FLT_MAX, -FLT_MAX, FLT_MIN, 0x1p-149, 1.0, -1.0};
  auto add_format = [&](double max, double min_subnormal, int man_bits) {
    const double tie_above_max = max * (1.0 + std::ldexp(1.0, -(man_bits + 1)));
    for (double x : {max, tie_above_max, std::nextafter(tie_above_max, 0.0), std::nextafter(tie_above_max, INFINITY),
                     2 * max, min_subnormal, min_subnormal / 2, std::nextafter(min_subnormal / 2, 1.0),
                     std::nextafter(min_subnormal / 2, 0.0), 1.5 * min_subnormal, 2.5 * min_subnormal}) {
      v.push_back(x);
      v.push_back(-x);
    }
  };
  add_format(Bf16Format::kMax, Bf16Format::kMinSubnormal, Bf16Format::kManBits);
  add_format(F16Format::kMax, F16Format::kMinSubnormal, F16Format::kManBits);
  add_format(E4m3Format::kMax, E4m3Format::kMinSubnormal, E4m3Format::kManBits);
  add_format(E5m2Format::kMax, E5m2Format::kMinSubnormal, E5m2Format::kManBits);
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> exponent(-40.0, 40.0);
  for (int i = 0; i < 1500; ++i) v.push_back((i % 2 ? -1.0 : 1.0) * std::exp2(exponent(rng)));
  return v;
}

// Host bytes of values in a wide dtype.
std::vector<unsigned char> wide_bytes(const std::vector<double>& values, DType dtype) {
  std::vector<unsigned char> bytes(values.size() * dtype_size(dtype));
  for (size_t i = 0; i < values.size(); ++i) {
    if (dtype == DType::F64) std::memcpy(&bytes[8 * i], &values[i], 8);
    else {
      const auto f = static_cast<float>(values[i]);
      std::memcpy(&bytes[4 * i], &f, 4);
    }
  }
  return bytes;
}

Tensor host_tensor(std::vector<unsigned char>& bytes, int64_t n, DType dtype) {
  bytes.resize(std::max<size_t>(static_cast<size_t>(n) * dtype_size(dtype), bytes.size()));
  return Tensor(bytes.data(), {n}, dtype);
}

struct CastResult {
  std::vector<unsigned char> out;
  float amax = 0.0f;
  std::array<int32_t, 2> counts{};
  Fp8Meta meta;
};

class CastBitwise : public EmuTest {
 protected:
  // The context's scratch is freed before EmuTest's device reset.
  void TearDown() override {
    ctx_.reset();
    EmuTest::TearDown();
  }

  cpu::CpuBackend cpu_{1};
  std::optional<KernelContext> ctx_{std::in_place};
  std::vector<double> values_ = edge_values();
  int64_t n() const { return static_cast<int64_t>(values_.size()); }

  // cast(in (wide, the edge values) -> out) on both backends; stats: amax and counts; meta: out's state.
  void compare_cast(DType wide, DType out_dtype, float scale, bool saturate, bool stats, const Fp8Meta* meta) {
    const std::string what = fmt::format("{} -> {} scale {} saturate {} stats {} state {}", dtype_name(wide),
                                         dtype_name(out_dtype), scale, saturate, stats, meta != nullptr);
    std::vector<unsigned char> in_bytes = wide_bytes(values_, wide);
    CastResult want, got;
    {
      std::vector<unsigned char> out_bytes;
      float amax = 0.0f;
      int32_t counts[2] = {0, 0};
      Fp8Meta m = meta ? *meta : Fp8Meta{};
      CastArgs a;
      a.in = host_tensor(in_bytes, n(), wide);
      a.out = host_tensor(out_bytes, n(), out_dtype);
      if (meta) a.out.scaling = &m;
      a.scale = scale;
      a.saturate = saturate;
      if (stats) a.amax = Tensor(&amax, {1}, DType::F32), a.counts = Tensor(counts, {2}, DType::I32);
      cpu_.cast(a);
      want = {out_bytes, amax, {counts[0], counts[1]}, m};
    }
    {
      DeviceTensor in({n()}, wide), out({n()}, out_dtype), amax({1}, DType::F32), counts({2}, DType::I32);
      DeviceArray<Fp8Meta> m(1);
      in.upload(in_bytes.data());
      const float zero = 0.0f;
      const int32_t zeros[2] = {0, 0};
      amax.upload(&zero);
      counts.upload(zeros);
      m.upload({meta ? *meta : Fp8Meta{}});
      CastArgs a;
      a.in = in.tensor();
      a.out = out.tensor();
      if (meta) a.out.scaling = m.get();
      a.scale = scale;
      a.saturate = saturate;
      if (stats) a.amax = amax.tensor(), a.counts = counts.tensor();
      cast(a, ctx_->get());
      got.out = out.download();
      std::memcpy(&got.amax, amax.download().data(), 4);
      std::memcpy(got.counts.data(), counts.download().data(), 8);
      got.meta = m.download()[0];
    }
    EXPECT_EQ(got.out, want.out) << what;
    EXPECT_EQ(f32_bits(got.amax), f32_bits(want.amax)) << what;
    EXPECT_EQ(got.counts, want.counts) << what;
    EXPECT_EQ(std::memcmp(&got.meta, &want.meta, sizeof(Fp8Meta)), 0)
        << what << ": amax " << got.meta.amax << " vs " << want.meta.amax << ", underflows " << got.meta.underflows
        << " vs " << want.meta.underflows << ", saturated " << got.meta.saturated << " vs " << want.meta.saturated;
  }
};

TEST_F(CastBitwise, QuantiseMatchesTheCpuBitForBit) {
  for (DType wide : {DType::F32, DType::F64})
    for (DType f : kNarrow)
      for (float scale : {1.0f, 0.375f, 1000.0f})
        for (bool saturate : {true, false})
          for (bool stats : {false, true})
            if (scale != 1.0f || stats) compare_cast(wide, f, scale, saturate, stats, nullptr);
}

TEST_F(CastBitwise, PlainRoundingMatchesTheCpuBitForBit) {
  for (DType wide : {DType::F32, DType::F64})
    for (DType f : kNarrow) compare_cast(wide, f, 1.0f, true, false, nullptr);
  compare_cast(DType::F64, DType::F32, 1.0f, true, false, nullptr);
}

TEST_F(CastBitwise, TheScalingStateFormMatchesTheCpuBitForBit) {
  for (DType wide : {DType::F32, DType::F64}) {
    for (DType f : {DType::E4M3, DType::E5M2}) {
      for (float scale : {1.0f, 0.01f, 300.0f}) {
        Fp8Meta meta;
        meta.scale = scale;
        meta.scale_inv = 1.0f / scale;
        meta.amax = 0.5f;
        meta.underflows = 3;
        for (bool saturate : {true, false}) compare_cast(wide, f, 1.0f, saturate, false, &meta);
      }
    }
  }
}

// Every code of every narrow format: dequantised to F32 and F64 with and without a scale, converted to
// every other narrow format, and (FP8) read through a scaling state into every format.
TEST_F(CastBitwise, DecodingEveryCodeMatchesTheCpuBitForBit) {
  for (DType f : kNarrow) {
    const int64_t codes = dtype_size(f) == 1 ? 256 : 65536;
    std::vector<unsigned char> in_bytes(static_cast<size_t>(codes) * dtype_size(f));
    for (int64_t c = 0; c < codes; ++c) {
      const auto code = static_cast<uint16_t>(c);
      std::memcpy(&in_bytes[static_cast<size_t>(c) * dtype_size(f)], &code, dtype_size(f));  // little endian
    }
    DeviceTensor in({codes}, f);
    in.upload(in_bytes.data());
    // in_scale: a scaling state on in (FP8 only), else 0; scale: the dequantising argument.
    auto compare = [&](DType to, float scale, float in_scale) {
      const std::string what = fmt::format("{} -> {} scale {} state scale {}", dtype_name(f), dtype_name(to), scale, in_scale);
      Fp8Meta in_meta, out_meta;
      in_meta.scale = in_scale, in_meta.scale_inv = 1.0f / in_scale;
      out_meta.scale = 2.0f, out_meta.scale_inv = 0.5f;
      Fp8Meta want_meta = out_meta;
      std::vector<unsigned char> want_bytes;
      CastArgs a;
      a.in = Tensor(in_bytes.data(), {codes}, f);
      a.out = host_tensor(want_bytes, codes, to);
      a.scale = scale;
      if (in_scale != 0.0f) a.in.scaling = &in_meta;
      if (is_fp8(to)) a.out.scaling = &want_meta;
      cpu_.cast(a);

      DeviceTensor out({codes}, to);
      DeviceArray<Fp8Meta> d_in_meta(std::vector<Fp8Meta>{in_meta}), d_out_meta(std::vector<Fp8Meta>{out_meta});
      a.in = in.tensor();
      a.out = out.tensor();
      if (in_scale != 0.0f) a.in.scaling = d_in_meta.get();
      if (is_fp8(to)) a.out.scaling = d_out_meta.get();
      cast(a, ctx_->get());
      const std::vector<unsigned char> got = out.download();
      want_bytes.resize(got.size());
      EXPECT_EQ(got, want_bytes) << what;
      const Fp8Meta got_meta = d_out_meta.download()[0];
      EXPECT_EQ(std::memcmp(&got_meta, &want_meta, sizeof(Fp8Meta)), 0) << what;
    };
    for (DType to : {DType::F32, DType::F64})
      for (float scale : {1.0f, 3.0f}) compare(to, scale, 0.0f);
    for (DType to : kNarrow)
      if (to != f) compare(to, 1.0f, 0.0f);
    if (is_fp8(f))
      for (DType to : {DType::F32, DType::F64, DType::BF16, DType::F16, DType::E4M3, DType::E5M2}) compare(to, 1.0f, 3.0f);
  }
}

TEST_F(CastBitwise, QuantizeRoundtripMatchesTheCpuBitForBit) {
  for (DType wide : {DType::F32, DType::F64}) {
    for (DType f : kNarrow) {
      for (float scale : {1.0f, 0.375f, 1000.0f}) {
        for (bool dequantize : {true, false}) {
          for (bool saturate : {true, false}) {
            std::vector<unsigned char> in_bytes = wide_bytes(values_, wide), want_bytes;
            float want_amax = 0.0f;
            int32_t want_counts[2] = {0, 0};
            QuantizeRoundtripArgs a;
            a.in = host_tensor(in_bytes, n(), wide);
            a.out = host_tensor(want_bytes, n(), wide);
            a.format = f;
            a.scale = scale;
            a.saturate = saturate;
            a.dequantize = dequantize;
            a.amax = Tensor(&want_amax, {1}, DType::F32);
            a.counts = Tensor(want_counts, {2}, DType::I32);
            cpu_.quantize_roundtrip(a);

            DeviceTensor in({n()}, wide), amax({1}, DType::F32), counts({2}, DType::I32);
            in.upload(in_bytes.data());
            const float zero = 0.0f;
            const int32_t zeros[2] = {0, 0};
            amax.upload(&zero);
            counts.upload(zeros);
            a.in = in.tensor();
            a.out = in.tensor();  // in place
            a.amax = amax.tensor();
            a.counts = counts.tensor();
            quantize_roundtrip(a, ctx_->get());
            const std::string what = fmt::format("{} via {} scale {} dequantize {} saturate {}", dtype_name(wide),
                                                 dtype_name(f), scale, dequantize, saturate);
            EXPECT_EQ(in.download(), want_bytes) << what;
            EXPECT_EQ(amax.download(), std::vector<unsigned char>(reinterpret_cast<unsigned char*>(&want_amax),
                                                                  reinterpret_cast<unsigned char*>(&want_amax) + 4))
                << what;
            int32_t got_counts[2];
            std::memcpy(got_counts, counts.download().data(), 8);
            EXPECT_EQ(got_counts[0], want_counts[0]) << what;
            EXPECT_EQ(got_counts[1], want_counts[1]) << what;
          }
        }
      }
    }
  }
}

// The scale fp8_current_scale writes into the device state is the host rule's, bit for bit, including the
// FLT_MAX clamp of a tiny amax and the previous scale kept for a zero, inf or NaN amax.
TEST_F(CastBitwise, CurrentScalingComputesTheHostScaleOnTheDevice) {
  for (double amax_value : {1.0, 3.7e-3, 1e-38, 0.0, 448.0, 65504.0, static_cast<double>(INFINITY), static_cast<double>(NAN)}) {
    for (DType f : {DType::E4M3, DType::E5M2}) {
      for (int margin : {0, 3}) {
        std::vector<double> values = {0.5 * amax_value, -amax_value, 0.25 * amax_value};
        std::vector<unsigned char> in_bytes = wide_bytes(values, DType::F32);
        Fp8Meta want;
        want.scale = 5.0f;
        want.scale_inv = 0.2f;
        cpu_.fp8_current_scale({Tensor(in_bytes.data(), {3}, DType::F32), &want, f, margin});

        DeviceTensor in({3}, DType::F32);
        in.upload(in_bytes.data());
        Fp8Meta start;
        start.scale = 5.0f;
        start.scale_inv = 0.2f;
        DeviceArray<Fp8Meta> meta(std::vector<Fp8Meta>{start});
        fp8_current_scale({in.tensor(), meta.get(), f, margin}, ctx_->get());
        const Fp8Meta got = meta.download()[0];
        EXPECT_EQ(f32_bits(got.scale), f32_bits(want.scale)) << "amax " << amax_value << " margin " << margin;
        EXPECT_EQ(f32_bits(got.scale_inv), f32_bits(want.scale_inv)) << "amax " << amax_value << " margin " << margin;
      }
    }
  }
}

}  // namespace
}  // namespace gpt::cuda::test
