// The fused attention (cuda/kernels/flash_attention*.cu) on the emulator against the CPU's attention.
//
// Reference: the CPU backend's attention in FP32 on the same (BF16- or F16-valued) inputs, with its
// dropout; the log-sum-exp in double from the same inputs. Each output of the fused kernels (out, lse,
// dq, dk, dv) must be within kFactor times the error of a naive same-precision attention, the textbook
// one in which every matrix (S, P, Pd, out; dPd, dS, dq, dk, dv) is rounded to the compute format as it
// is produced (FP32 accumulation and softmax statistics), as a framework's BF16 attention computes it,
// with the softmax backward's D = rowsum(dout ⊙ out) taken from the rounded output as FlashAttention takes
// it (at T = 1, where dq = dk = 0 exactly, that rounding is all the error there is); FlashAttention's own
// tests hold their kernels to 2 x such a reference's error. Errors are the largest
// absolute difference over the tensor. The measured errors are printed for every case (fused / naive);
// on the emulator, BF16, hs = 128, T = 257, dropout 0.1: out 1.0e-2 / 1.3e-2, lse 7.2e-7 / 8.0e-3, dq 6.3e-3 /
// 8.9e-3, dk 9.7e-3 / 1.4e-2, dv 7.9e-3 / 9.8e-3; F16, hs = 64, T = 257: out 6.5e-4 / 1.6e-3, dq 6.4e-4 /
// 1.0e-3 (2026-12-01); BF16, T = 1024, dropout 0.1: hs 64 out 1.0e-2 / 1.5e-2, dq 6.2e-3 / 1.3e-2, dk 8.8e-3 /
// 1.5e-2, dv 7.2e-3 / 8.4e-3; hs 128 dq 6.0e-3 / 1.8e-2, dk 1.1e-2 / 1.7e-2 (2026-12-03). Every ratio is under
// 1.1 but one: BF16, hs 128, T = 1, dq and dk 4.8e-3 against 1.9e-3 (2.5 x), within the floor below; there
// the exact value is 0 and both errors are rounding noise.
// Shapes: head sizes 64 and 128 (tensor cores), 13, 33, 96, 100 (the tiled kernels) and 160 (the scalar
// ones), T in {1, 67, 128, 257, 1024} (a ragged last tile, one tile, several, sixteen query blocks: each
// backward pass refills both of its stages of tiles many times), B = 2 x NH = 2 heads; T = 1024 takes 4-10 s
// a case (60-150 s under the sanitizers), so it has a test of its own, where F16 runs at head size 128
// only. The outputs are poisoned (NaN) before each call.
// The dropout mask is checked exactly: with v one-hot (v row t2 = e_t2, T <= hs), out[t][t2] is
// P[t][t2] M[t][t2] / (1-p), so its zeros are the dropped elements, which must be the CPU's.
#include "kernels/flash_attention.h"
#include "kernels/flash_attention_params.h"

#include "cpu/gradcheck.h"
#include "cuda/kernels/kernel_test_util.h"
#include "precision/float_formats.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

namespace gpt::cuda::test {
namespace {

constexpr double kFactor = 2.0;

struct Shape {
  int64_t B, NH, T, hs;
  int64_t C() const { return NH * hs; }
};

double round_to(DType f, double x) {
  switch (f) {
    case DType::BF16: return bf16_to_f32(f64_to_bf16(x));
    case DType::F16: return f16_to_f32(f32_to_f16(static_cast<float>(x)));
    default: return static_cast<float>(x);
  }
}

DropoutSpec dropout_of(float p) {
  DropoutSpec d;
  d.p = p;
  d.stream = RngStream{0xfeedbeef1234ull, 11, 1, 4, RngSite::AttentionProbs};
  return d;
}

// Every output as doubles: out [B,T,C], lse [B,NH,T], dqkv [B,T,3C].
struct Outputs {
  std::vector<double> out, lse, dqkv;
};

std::vector<uint16_t> encode(DType f, const std::vector<double>& x) {
  std::vector<uint16_t> codes(x.size());
  for (size_t i = 0; i < x.size(); ++i) codes[i] = f == DType::BF16 ? f64_to_bf16(x[i]) : f32_to_f16(static_cast<float>(x[i]));
  return codes;
}

std::vector<double> decode(DType f, const std::vector<unsigned char>& bytes) {
  std::vector<double> x(bytes.size() / dtype_size(f));
  for (size_t i = 0; i < x.size(); ++i) {
    if (f == DType::F32) {
      float v;
      std::memcpy(&v, bytes.data() + 4 * i, 4);
      x[i] = v;
    } else {
      uint16_t c;
      std::memcpy(&c, bytes.data() + 2 * i, 2);
      x[i] = f == DType::BF16 ? bf16_to_f32(c) : f16_to_f32(c);
    }
  }
  return x;
}

void upload(DeviceTensor& t, DType f, const std::vector<double>& x) {
  if (f == DType::F32) {
    std::vector<float> v(x.begin(), x.end());
    t.upload(v.data());
  } else {
    t.upload(encode(f, x).data());
  }
}

void poison(DeviceTensor& t) {
  std::vector<unsigned char> nan(t.tensor().bytes(), 0xFF);
  t.upload(nan.data());
}

// e4m3_out: the backward gets the output as an FP8 recipe stores it, in E4M3 (here NaN codes: it must not
// be read, D then coming from the probabilities).
Outputs run_fused(const Shape& s, DType f, const std::vector<double>& qkv, const std::vector<double>& dout, float p,
                  bool e4m3_out = false) {
  KernelContext ctx;
  DeviceTensor tqkv({s.B, s.T, 3 * s.C()}, f), tdout({s.B, s.T, s.C()}, f), out({s.B, s.T, s.C()}, f);
  DeviceTensor lse({s.B, s.NH, s.T}, DType::F32), dqkv({s.B, s.T, 3 * s.C()}, f), delta({s.B, s.NH, s.T}, DType::F32);
  upload(tqkv, f, qkv);
  upload(tdout, f, dout);
  DeviceTensor fp8_out({s.B, s.T, s.C()}, DType::E4M3);
  for (DeviceTensor* t : {&out, &lse, &dqkv, &delta, &fp8_out}) poison(*t);
  const int nh = static_cast<int>(s.NH);
  flash_attention_forward({out.tensor(), lse.tensor(), tqkv.tensor(), nh, dropout_of(p)}, ctx.get());
  flash_attention_backward({dqkv.tensor(), delta.tensor(), tdout.tensor(), tqkv.tensor(), lse.tensor(), nh, dropout_of(p),
                            e4m3_out ? fp8_out.tensor() : out.tensor()},
                           ctx.get());
  CUDA_CHECK(cudaDeviceSynchronize());
  return {decode(f, out.download()), decode(DType::F32, lse.download()), decode(f, dqkv.download())};
}

// The CPU backend's attention in FP32 (its materialised probabilities), and the log-sum-exp in double.
Outputs run_cpu(const Shape& s, const std::vector<double>& qkv, const std::vector<double>& dout, float p) {
  std::vector<float> q(qkv.begin(), qkv.end()), d(dout.begin(), dout.end());
  std::vector<float> out(s.B * s.T * s.C()), probs(s.B * s.NH * s.T * s.T), dprobs(probs.size()), dqkv(q.size());
  const auto host = [](void* data, std::initializer_list<int64_t> dims) { return Tensor(data, dims, DType::F32, Device::CPU); };
  const int nh = static_cast<int>(s.NH);
  Backend& cpu = gpt::test::cpu_backend();
  cpu.attention_forward({host(out.data(), {s.B, s.T, s.C()}), host(probs.data(), {s.B, s.NH, s.T, s.T}),
                         host(q.data(), {s.B, s.T, 3 * s.C()}), nh, dropout_of(p)});
  cpu.attention_backward({host(dqkv.data(), {s.B, s.T, 3 * s.C()}), host(dprobs.data(), {s.B, s.NH, s.T, s.T}),
                          host(d.data(), {s.B, s.T, s.C()}), host(q.data(), {s.B, s.T, 3 * s.C()}),
                          host(probs.data(), {s.B, s.NH, s.T, s.T}), nh, dropout_of(p)});
  Outputs r{std::vector<double>(out.begin(), out.end()), std::vector<double>(s.B * s.NH * s.T),
            std::vector<double>(dqkv.begin(), dqkv.end())};
  const double scale = 1.0 / std::sqrt(static_cast<double>(s.hs));
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.NH; ++h)
      for (int64_t t = 0; t < s.T; ++t) {
        std::vector<double> sc(t + 1);
        for (int64_t t2 = 0; t2 <= t; ++t2) {
          double acc = 0.0;
          for (int64_t c = 0; c < s.hs; ++c)
            acc += qkv[(b * s.T + t) * 3 * s.C() + h * s.hs + c] * qkv[(b * s.T + t2) * 3 * s.C() + s.C() + h * s.hs + c];
          sc[t2] = scale * acc;
        }
        const double m = *std::max_element(sc.begin(), sc.end());
        double sum = 0.0;
        for (double x : sc) sum += std::exp(x - m);
        r.lse[(b * s.NH + h) * s.T + t] = m + std::log(sum);
      }
  return r;
}

// The textbook attention in format f: each matrix rounded to f as it is produced.
Outputs run_naive(const Shape& s, DType f, const std::vector<double>& qkv, const std::vector<double>& dout, float p) {
  const int64_t T = s.T, C = s.C(), hs = s.hs, ld = 3 * C;
  const DropoutSpec spec = dropout_of(p);
  const uint32_t threshold = dropout_threshold(p);
  const double keep_scale = static_cast<float>(1.0 / (1.0 - static_cast<double>(p)));
  const double scale = 1.0 / std::sqrt(static_cast<double>(hs));
  const auto rd = [f](double x) { return round_to(f, x); };
  Outputs r{std::vector<double>(s.B * T * C), std::vector<double>(s.B * s.NH * T), std::vector<double>(s.B * T * ld)};
  std::vector<double> S(T * T), P(T * T), Pd(T * T), F(T * T), dP(T * T), dS(T * T);
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.NH; ++h) {
      const auto q = [&](int64_t t, int64_t c) { return qkv[(b * T + t) * ld + h * hs + c]; };
      const auto k = [&](int64_t t, int64_t c) { return qkv[(b * T + t) * ld + C + h * hs + c]; };
      const auto v = [&](int64_t t, int64_t c) { return qkv[(b * T + t) * ld + 2 * C + h * hs + c]; };
      const auto dO = [&](int64_t t, int64_t c) { return dout[(b * T + t) * C + h * hs + c]; };
      const int64_t bh = b * s.NH + h;
      for (int64_t t = 0; t < T; ++t) {
        double m = -INFINITY;
        for (int64_t t2 = 0; t2 <= t; ++t2) {
          double acc = 0.0;
          for (int64_t c = 0; c < hs; ++c) acc += q(t, c) * k(t2, c);
          S[t * T + t2] = rd(scale * acc);
          m = std::max(m, S[t * T + t2]);
        }
        double sum = 0.0;
        for (int64_t t2 = 0; t2 <= t; ++t2) sum += std::exp(S[t * T + t2] - m);
        r.lse[bh * T + t] = m + std::log(sum);
        for (int64_t t2 = 0; t2 <= t; ++t2) {
          P[t * T + t2] = rd(std::exp(S[t * T + t2] - m) / sum);
          const bool keep = !spec.active() || spec.stream.word(attention_mask_element(bh, T, t, t2)) >= threshold;
          F[t * T + t2] = spec.active() ? (keep ? keep_scale : 0.0) : 1.0;
          Pd[t * T + t2] = rd(P[t * T + t2] * F[t * T + t2]);
        }
        for (int64_t c = 0; c < hs; ++c) {
          double acc = 0.0;
          for (int64_t t2 = 0; t2 <= t; ++t2) acc += Pd[t * T + t2] * v(t2, c);
          r.out[(b * T + t) * C + h * hs + c] = rd(acc);
        }
      }
      for (int64_t t = 0; t < T; ++t) {
        double D = 0.0;
        for (int64_t c = 0; c < hs; ++c) D += dO(t, c) * r.out[(b * T + t) * C + h * hs + c];
        for (int64_t t2 = 0; t2 <= t; ++t2) {
          double acc = 0.0;
          for (int64_t c = 0; c < hs; ++c) acc += dO(t, c) * v(t2, c);
          dP[t * T + t2] = rd(rd(acc) * F[t * T + t2]);
        }
        for (int64_t t2 = 0; t2 <= t; ++t2) dS[t * T + t2] = rd(P[t * T + t2] * (dP[t * T + t2] - D));
      }
      for (int64_t t = 0; t < T; ++t)
        for (int64_t c = 0; c < hs; ++c) {
          double dq = 0.0, dk = 0.0, dv = 0.0;
          for (int64_t t2 = 0; t2 <= t; ++t2) dq += dS[t * T + t2] * k(t2, c);
          for (int64_t t1 = t; t1 < T; ++t1) {
            dk += dS[t1 * T + t] * q(t1, c);
            dv += Pd[t1 * T + t] * dO(t1, c);
          }
          const int64_t at = (b * T + t) * ld + h * hs + c;
          r.dqkv[at] = rd(scale * dq);
          r.dqkv[at + C] = rd(scale * dk);
          r.dqkv[at + 2 * C] = rd(dv);
        }
    }
  return r;
}

// Largest |x - ref| over the part (0 q, 1 k, 2 v) of a [B,T,3C] tensor, or the whole tensor (part -1).
double max_error(const std::vector<double>& x, const std::vector<double>& ref, int64_t C = 0, int part = -1) {
  double e = 0.0;
  for (size_t i = 0; i < x.size(); ++i) {
    if (part >= 0 && static_cast<int64_t>(i % (3 * C)) / C != part) continue;
    e = std::max(e, std::isfinite(x[i]) ? std::fabs(x[i] - ref[i]) : INFINITY);
  }
  return e;
}

std::vector<double> random_values(size_t n, DType f, double range, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-range, range);
  std::vector<double> x(n);
  for (double& v : x) v = round_to(f, u(rng));
  return x;
}

struct Case {
  DType f;
  int64_t hs, T;
  float p;
};

void check_case(const Case& c) {
  const Shape s{2, 2, c.T, c.hs};
  SCOPED_TRACE(::testing::Message() << dtype_name(c.f) << " hs " << c.hs << " T " << c.T << " p " << c.p);
  // q and k in [-2, 2]: scores of standard deviation ~1.3, softmax rows far from uniform.
  const std::vector<double> qkv = random_values(s.B * s.T * 3 * s.C(), c.f, 2.0, static_cast<uint32_t>(c.hs * 1000 + c.T));
  const std::vector<double> dout = random_values(s.B * s.T * s.C(), c.f, 1.0, static_cast<uint32_t>(c.T + 7));
  const Outputs fused = run_fused(s, c.f, qkv, dout, c.p);
  const Outputs ref = run_cpu(s, qkv, dout, c.p);
  const Outputs naive = run_naive(s, c.f, qkv, dout, c.p);
  const struct {
    const char* name;
    double fused, naive;
  } rows[] = {
      {"out", max_error(fused.out, ref.out), max_error(naive.out, ref.out)},
      {"lse", max_error(fused.lse, ref.lse), max_error(naive.lse, ref.lse)},
      {"dq", max_error(fused.dqkv, ref.dqkv, s.C(), 0), max_error(naive.dqkv, ref.dqkv, s.C(), 0)},
      {"dk", max_error(fused.dqkv, ref.dqkv, s.C(), 1), max_error(naive.dqkv, ref.dqkv, s.C(), 1)},
      {"dv", max_error(fused.dqkv, ref.dqkv, s.C(), 2), max_error(naive.dqkv, ref.dqkv, s.C(), 2)},
  };
  // As FlashAttention's tests, an absolute floor of 2 units of rounding at magnitude 0.3 (one unit in the
  // last place there: 2^-2 x 2^-7 for BF16, 2^-2 x 2^-10 for F16), for outputs that are all rounding noise
  // (T = 1: dq = dk = 0).
  const double floor = std::ldexp(1.0, c.f == DType::BF16 ? -9 : -12);
  std::printf("flash %s hs %3lld T %3lld p %.1f (fused / naive max |error|):", std::string(dtype_name(c.f)).c_str(),
              static_cast<long long>(c.hs), static_cast<long long>(c.T), c.p);
  for (const auto& r : rows) {
    std::printf("  %s %.1e / %.1e", r.name, r.fused, r.naive);
    EXPECT_LE(r.fused, kFactor * r.naive + floor) << r.name;
  }
  std::printf("\n");
}

class FlashAttention : public EmuTest {};

TEST_F(FlashAttention, TensorCoreKernelsWithinTwiceANaiveBf16AttentionsError) {
  for (int64_t hs : {64, 128})
    for (int64_t T : {1, 67, 128, 257}) check_case({DType::BF16, hs, T, T == 128 ? 0.0f : 0.1f});
}

TEST_F(FlashAttention, TensorCoreKernelsWithinTwiceANaiveF16AttentionsError) {
  for (int64_t hs : {64, 128})
    for (int64_t T : {67, 257}) check_case({DType::F16, hs, T, T == 67 ? 0.1f : 0.0f});
}

// A test of its own: the sanitizer build's quick run (scripts/sanitize.sh) leaves it out.
TEST_F(FlashAttention, TensorCoreKernelsAtT1024WithinTwiceANaiveAttentionsError) {
  check_case({DType::BF16, 64, 1024, 0.1f});
  check_case({DType::BF16, 128, 1024, 0.1f});
  check_case({DType::F16, 128, 1024, 0.1f});
}

// Head size 13: two columns a lane, element loads; 33: four, one past a run; 96: eight, 16-byte packs
// with a padded run of zeros; 100: eight, past a pack multiple.
TEST_F(FlashAttention, TiledKernelsTakeOddHeadSizes) {
  for (DType f : {DType::BF16, DType::F16})
    for (int64_t T : {1, 67, 130}) check_case({f, 13, T, 0.1f});
  check_case({DType::F16, 33, 67, 0.1f});
  check_case({DType::BF16, 96, 67, 0.0f});
  check_case({DType::BF16, 100, 67, 0.1f});
}

TEST_F(FlashAttention, ScalarKernelsTakeHeadSizesPastTheTiledOnes) {
  check_case({DType::BF16, 160, 67, 0.1f});
  check_case({DType::F16, 160, 1, 0.0f});
}

// The fp32 recipe's fused attention (the tiled kernels in FP32) against the CPU's FP32: both sum the
// same products in different orders, so they agree to a few FP32 units of the largest terms. Head sizes
// 64 and 128 (16-byte packs, both column counts of the real models), 32 (two columns a lane) and 13
// (element loads); T = 257 walks nine tiles, the last ragged.
TEST_F(FlashAttention, Fp32MatchesTheCpuToFp32Rounding) {
  for (const Shape& s : {Shape{2, 2, 67, 64}, Shape{1, 2, 257, 128}, Shape{2, 3, 67, 13}, Shape{2, 2, 40, 32}}) {
    SCOPED_TRACE(::testing::Message() << "hs " << s.hs << " T " << s.T);
    const std::vector<double> qkv = random_values(s.B * s.T * 3 * s.C(), DType::F32, 2.0, 3);
    const std::vector<double> dout = random_values(s.B * s.T * s.C(), DType::F32, 1.0, 4);
    const Outputs fused = run_fused(s, DType::F32, qkv, dout, 0.1f);
    const Outputs ref = run_cpu(s, qkv, dout, 0.1f);
    const double out = max_error(fused.out, ref.out), lse = max_error(fused.lse, ref.lse);
    const double dqkv = max_error(fused.dqkv, ref.dqkv);
    std::printf("flash f32 hs %3lld T %3lld p 0.1 (fused - CPU, max |error|):  out %.1e  lse %.1e  dqkv %.1e\n",
                static_cast<long long>(s.hs), static_cast<long long>(s.T), out, lse, dqkv);
    EXPECT_LE(out, 2e-6);
    EXPECT_LE(lse, 2e-6);
    EXPECT_LE(dqkv, 2e-5);
  }
}

// An FP8 recipe's backward (out stored in E4M3) takes D from the probabilities: its gradients are as close
// to the CPU's as the compute-format path's (2 x the naive attention's error), and out is never read.
TEST_F(FlashAttention, AnE4m3OutputIsNotReadByTheBackward) {
  for (int64_t hs : {64, 128, 13, 160}) {  // D on tensor cores (64, 128), the tiled kernels (13), scalar (160)
    SCOPED_TRACE(::testing::Message() << "hs " << hs);
    const Shape s{2, 2, 67, hs};
    const std::vector<double> qkv = random_values(s.B * s.T * 3 * s.C(), DType::BF16, 2.0, 21);
    const std::vector<double> dout = random_values(s.B * s.T * s.C(), DType::BF16, 1.0, 22);
    const Outputs fused = run_fused(s, DType::BF16, qkv, dout, 0.1f, true);
    const Outputs ref = run_cpu(s, qkv, dout, 0.1f);
    const Outputs naive = run_naive(s, DType::BF16, qkv, dout, 0.1f);
    for (int part = 0; part < 3; ++part)
      EXPECT_LE(max_error(fused.dqkv, ref.dqkv, s.C(), part), kFactor * max_error(naive.dqkv, ref.dqkv, s.C(), part))
          << "part " << part;
  }
}

void check_mask(DType f, int64_t hs, int64_t T) {
  SCOPED_TRACE(::testing::Message() << dtype_name(f) << " hs " << hs << " T " << T);
  const Shape s{2, 2, T, hs};
  std::vector<double> qkv = random_values(s.B * s.T * 3 * s.C(), f, 1.0, 9);
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t h = 0; h < s.NH; ++h)
        for (int64_t c = 0; c < hs; ++c) qkv[(b * T + t) * 3 * s.C() + 2 * s.C() + h * hs + c] = c == t ? 1.0 : 0.0;
  const std::vector<double> dout(s.B * s.T * s.C(), 0.0);
  const Outputs fused = run_fused(s, f, qkv, dout, 0.5f);
  const Outputs ref = run_cpu(s, qkv, dout, 0.5f);
  int64_t dropped = 0, elements = 0;
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.NH; ++h)
      for (int64_t t = 0; t < T; ++t)
        for (int64_t t2 = 0; t2 <= t; ++t2) {
          const int64_t i = (b * T + t) * s.C() + h * hs + t2;
          ASSERT_EQ(ref.out[i] == 0.0, fused.out[i] == 0.0)
              << "mask differs at b " << b << " h " << h << " t " << t << " t2 " << t2 << ": CPU " << ref.out[i]
              << ", fused " << fused.out[i];
          dropped += ref.out[i] == 0.0;
          ++elements;
        }
  EXPECT_NEAR(static_cast<double>(dropped) / elements, 0.5, 0.1);
}

TEST_F(FlashAttention, DropoutMaskIsTheCpusBitForBit) {
  check_mask(DType::BF16, 128, 67);  // tensor cores: T = 67 <= hs, a ragged tile
  check_mask(DType::F16, 64, 64);
  check_mask(DType::BF16, 13, 13);   // the tiled kernels
  check_mask(DType::F32, 64, 64);
  check_mask(DType::BF16, 160, 67);  // the scalar kernels
}

// A Turing GPU (Tesla T4, 7.5: no cp.async, no BF16 mma, 64 KiB of shared memory a block): the
// tensor-core head sizes take the tiled kernels at 64 (43 KiB of tiles) and the scalar ones at 128 (the
// tiled kernels' 75 KiB do not fit), both formats within the same bound and the dropout mask the CPU's. A
// dispatch that chose a kernel the device cannot run fails the case: the emulator refuses its
// instructions (cp.async, mma) or its shared memory at the launch.
TEST_F(FlashAttention, ATuringGpuTakesTheKernelsItCanRun) {
  EXPECT_FALSE(flash_attention_uses_tensor_cores(DType::BF16, 64, 75));
  EXPECT_FALSE(flash_attention_uses_tensor_cores(DType::F16, 128, 75));
  EXPECT_TRUE(flash_attention_uses_tensor_cores(DType::F16, 128, 80));
  EXPECT_TRUE(tiled_attention_fits(64, 64 << 10));
  EXPECT_FALSE(tiled_attention_fits(128, 64 << 10));
  EXPECT_TRUE(tiled_attention_fits(128, 99 << 10));  // an RTX 3090 or 4090
  EXPECT_FALSE(tiled_attention_fits(128, 0));
  const EmulatedDevice t4(tesla_t4());
  for (DType f : {DType::BF16, DType::F16})
    for (int64_t hs : {64, 128}) check_case({f, hs, 67, 0.1f});
  check_mask(DType::F16, 64, 64);
  check_mask(DType::BF16, 128, 67);
}

TEST(FlashAttentionIndex, MaskElementsAre64Bit) {
  // (b*NH + h) = 300 heads of T = 70000: the flat element is past 2^40.
  EXPECT_EQ(attention_mask_element(300, 70000, 69999, 5), (uint64_t{300} * 70000 + 69999) * 70000 + 5);
  EXPECT_EQ(attention_mask_element(300, 70000, 69999, 5), uint64_t{1474899930005});
}

TEST_F(FlashAttention, AHeadSizeWithoutAKernelIsRefusedNamingIt) {
  const Shape s{1, 1, 4, 264};
  KernelContext ctx;
  DeviceTensor qkv({s.B, s.T, 3 * s.C()}, DType::BF16), out({s.B, s.T, s.C()}, DType::BF16), lse({s.B, s.NH, s.T}, DType::F32);
  try {
    flash_attention_forward({out.tensor(), lse.tensor(), qkv.tensor(), 1, {}}, ctx.get());
    FAIL() << "head size 264 was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("head size 264"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("train.attention: materialised"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace gpt::cuda::test
