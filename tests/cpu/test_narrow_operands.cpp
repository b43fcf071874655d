// Every CPU op with its floating-point tensors stored in each narrow format (BF16, F16, E4M3, E5M2),
// against the same op in FP64 on the decoded inputs. Inputs are fresh random values each run (normal,
// scaled so E4M3's range holds them), sizes are not multiples of 8 or 32, outputs are poisoned first
// (all bits set: NaN in every format) unless the op accumulates into them. The narrow op computes in
// FP32 and rounds once on store, so each output must be within half an ulp of its format of the FP64
// value, plus FP32 accumulation error: normwise, |out - ref|_max <= (2^-(mantissa bits + 1) + 1e-5) *
// |ref|_max (the tolerance table below). A second group checks the FP8 semantics: a scaled FP8 product
// applies both inverse scales, an FP8 output is stored with its scale and records amax and counts, and
// current scaling sets the scale where the data is.
#include "cpu/cpu_backend.h"
#include "cpu/gradcheck.h"
#include "precision/float_formats.h"
#include "precision/fp8_scaling.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace gpt {
namespace {

using test::cpu_backend;

// Normwise tolerance of a value stored in `format` after FP32 arithmetic.
double tolerance(DType format) {
  switch (format) {
    case DType::BF16: return 0x1p-8 + 1e-5;
    case DType::F16: return 0x1p-11 + 1e-5;
    case DType::E4M3: return 0x1p-4 + 1e-5;
    case DType::E5M2: return 0x1p-3 + 1e-5;
    default: return 1e-5;
  }
}

enum class Role { In, Out, InOut };
enum class Kind { Float, WideOnly, Tokens, Targets };

struct Operand {
  std::string name;
  std::vector<int64_t> shape;
  Role role = Role::In;
  Kind kind = Kind::Float;
  double scale = 1.0;     // of the random values
  bool positive = false;  // |values| + 0.5 (rstd, probabilities)
};

// One op call on tensors in operand order.
using Runner = std::function<void(Backend&, const std::vector<Tensor>&)>;

struct OpCase {
  std::string name;
  std::vector<Operand> operands;
  Runner run;
};

int64_t count(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

Tensor shaped(void* data, const std::vector<int64_t>& shape, DType dtype) {
  Tensor t;
  t.data = data;
  t.dtype = dtype;
  for (int64_t d : shape) t.shape[t.ndim++] = d;
  return t;
}

// Storage for one operand in one dtype.
struct Buffer {
  std::vector<std::byte> bytes;
  Tensor tensor;
};

Buffer make_buffer(const std::vector<int64_t>& shape, DType dtype) {
  Buffer b;
  b.bytes.resize(static_cast<size_t>(count(shape)) * dtype_size(dtype) + 1);
  b.tensor = shaped(b.bytes.data(), shape, dtype);
  return b;
}

std::vector<double> decoded(const Tensor& t) {
  std::vector<double> out(static_cast<size_t>(t.numel()));
  if (t.dtype == DType::F64) std::memcpy(out.data(), t.data, t.bytes());
  else cpu_backend().cast({shaped(out.data(), {t.numel()}, DType::F64), t.reshaped({t.numel()})});
  return out;
}

// Runs `c` with every Float operand in `format` and in FP64 on the same (decoded) values; compares outputs.
void check_case(const OpCase& c, DType format, uint32_t seed) {
  SCOPED_TRACE(c.name + " in " + std::string(dtype_name(format)));
  std::mt19937 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<Buffer> narrow, wide;
  std::vector<Tensor> narrow_t, wide_t;
  for (const Operand& o : c.operands) {
    const int64_t n = count(o.shape);
    if (o.kind == Kind::Tokens || o.kind == Kind::Targets) {
      Buffer b = make_buffer(o.shape, DType::I32);
      for (int64_t i = 0; i < n; ++i) {
        const int32_t v = static_cast<int32_t>(rng() % 13);
        b.tensor.as<int32_t>()[i] = o.kind == Kind::Targets && i % 5 == 2 ? -1 : v;
      }
      narrow_t.push_back(b.tensor);
      wide_t.push_back(b.tensor);
      narrow.push_back(std::move(b));
      wide.push_back(Buffer{});
      continue;
    }
    const DType nd = o.kind == Kind::WideOnly ? DType::F32 : format;
    Buffer nb = make_buffer(o.shape, nd), wb = make_buffer(o.shape, DType::F64);
    if (o.role == Role::Out) {
      std::memset(nb.bytes.data(), 0xFF, nb.bytes.size());
      std::memset(wb.bytes.data(), 0xFF, wb.bytes.size());
    } else {
      std::vector<double> values(static_cast<size_t>(n));
      for (double& v : values) {
        v = o.scale * normal(rng);
        if (o.positive) v = std::abs(v) + 0.5;
      }
      cpu_backend().cast({nb.tensor.reshaped({n}), shaped(values.data(), {n}, DType::F64)});
      const std::vector<double> exact = decoded(nb.tensor);
      std::memcpy(wb.bytes.data(), exact.data(), exact.size() * sizeof(double));
    }
    narrow_t.push_back(nb.tensor);
    wide_t.push_back(wb.tensor);
    narrow.push_back(std::move(nb));
    wide.push_back(std::move(wb));
  }
  c.run(cpu_backend(), narrow_t);
  c.run(cpu_backend(), wide_t);
  for (size_t i = 0; i < c.operands.size(); ++i) {
    const Operand& o = c.operands[i];
    if (o.role == Role::In || o.kind == Kind::Tokens || o.kind == Kind::Targets) continue;
    SCOPED_TRACE(o.name);
    const std::vector<double> got = decoded(narrow_t[i]), want = decoded(wide_t[i]);
    double max_ref = 0.0, max_err = 0.0;
    for (size_t j = 0; j < got.size(); ++j) {
      ASSERT_TRUE(std::isfinite(got[j])) << "element " << j << " is " << got[j];
      max_ref = std::max(max_ref, std::abs(want[j]));
      max_err = std::max(max_err, std::abs(got[j] - want[j]));
    }
    const DType stored = o.kind == Kind::WideOnly ? DType::F32 : format;
    EXPECT_LE(max_err, tolerance(stored) * std::max(max_ref, 1e-30)) << "max |ref| " << max_ref;
  }
}

constexpr int64_t B = 2, T = 7, C = 12, NH = 3, V = 13, Vp = 17;

std::vector<OpCase> op_cases() {
  std::vector<OpCase> cases;
  auto f = [](std::string name, std::vector<int64_t> shape, Role role = Role::In) {
    Operand o;
    o.name = std::move(name);
    o.shape = std::move(shape);
    o.role = role;
    return o;
  };
  {
    Operand a = f("a", {B * T, 9}), b = f("b", {11, 9}), bias = f("bias", {11}), out = f("out", {B * T, 11}, Role::Out);
    cases.push_back({"matmul", {out, a, b, bias}, [](Backend& be, const std::vector<Tensor>& t) {
                       be.matmul({t[0], t[1], t[2], t[3], false, true});
                     }});
    Operand acc = f("out", {9, 11}, Role::InOut), x = f("x", {B * T, 9}), g = f("g", {B * T, 11});
    cases.push_back({"matmul_accumulate", {acc, x, g}, [](Backend& be, const std::vector<Tensor>& t) {
                       be.matmul({t[0], t[1], t[2], Tensor(), true, false, 1.0f, 1.0f});
                     }});
  }
  cases.push_back({"bias_backward", {f("dbias", {11}, Role::InOut), f("dout", {B * T, 11})},
                   [](Backend& be, const std::vector<Tensor>& t) { be.bias_backward({t[0], t[1]}); }});
  {
    Operand rstd = f("rstd", {B, T}, Role::Out);
    cases.push_back({"layernorm_forward",
                     {f("out", {B, T, C}, Role::Out), f("mean", {B, T}, Role::Out), rstd, f("in", {B, T, C}),
                      f("weight", {C}), f("bias", {C})},
                     [](Backend& be, const std::vector<Tensor>& t) {
                       be.layernorm_forward({t[0], t[1], t[2], t[3], t[4], t[5]});
                     }});
    Operand r = f("rstd", {B, T});
    r.positive = true;
    Operand mean = f("mean", {B, T});
    mean.scale = 0.1;
    cases.push_back({"layernorm_backward",
                     {f("din", {B, T, C}, Role::InOut), f("dweight", {C}, Role::InOut), f("dbias", {C}, Role::InOut),
                      f("dout", {B, T, C}), f("in", {B, T, C}), f("weight", {C}), mean, r},
                     [](Backend& be, const std::vector<Tensor>& t) {
                       be.layernorm_backward({t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7]});
                     }});
  }
  {
    Operand probs = f("probs", {B, NH, T, T});
    probs.positive = true;
    probs.scale = 0.1;
    cases.push_back({"attention_forward", {f("out", {B, T, C}, Role::Out), f("probs", {B, NH, T, T}, Role::Out), f("qkv", {B, T, 3 * C})},
                     [](Backend& be, const std::vector<Tensor>& t) { be.attention_forward({t[0], t[1], t[2], int(NH)}); }});
    cases.push_back({"attention_backward",
                     {f("dqkv", {B, T, 3 * C}, Role::Out), f("dprobs", {B, NH, T, T}, Role::Out), f("dout", {B, T, C}),
                      f("qkv", {B, T, 3 * C}), probs},
                     [](Backend& be, const std::vector<Tensor>& t) {
                       be.attention_backward({t[0], t[1], t[2], t[3], t[4], int(NH)});
                     }});
  }
  cases.push_back({"softmax_forward", {f("out", {B, 5, 19}, Role::Out), f("in", {B, 5, 19})},
                   [](Backend& be, const std::vector<Tensor>& t) { be.softmax_forward({t[0], t[1]}); }});
  {
    Operand out = f("out", {B, 5, 19});
    out.positive = true;
    out.scale = 0.05;
    cases.push_back({"softmax_backward", {f("din", {B, 5, 19}, Role::Out), f("dout", {B, 5, 19}), out},
                     [](Backend& be, const std::vector<Tensor>& t) { be.softmax_backward({t[0], t[1], t[2]}); }});
  }
  cases.push_back({"gelu_forward", {f("out", {B, T, 4 * C}, Role::Out), f("in", {B, T, 4 * C})},
                   [](Backend& be, const std::vector<Tensor>& t) { be.gelu_forward({t[0], t[1]}); }});
  cases.push_back({"gelu_backward", {f("din", {B, T, 4 * C}, Role::Out), f("dout", {B, T, 4 * C}), f("in", {B, T, 4 * C})},
                   [](Backend& be, const std::vector<Tensor>& t) { be.gelu_backward({t[0], t[1], t[2]}); }});
  cases.push_back({"residual_forward", {f("out", {B, T, C}, Role::Out), f("residual", {B, T, C}), f("x", {B, T, C})},
                   [](Backend& be, const std::vector<Tensor>& t) { be.residual_forward({t[0], t[1], t[2]}); }});
  cases.push_back({"residual_backward_dropout", {f("dx", {B, T, C}, Role::Out), f("dout", {B, T, C})},
                   [](Backend& be, const std::vector<Tensor>& t) {
                     DropoutSpec d;
                     d.p = 0.25f;
                     d.stream = RngStream{7, 1, 0, 0, RngSite::MlpResidual};
                     be.residual_backward({t[0], t[1], d});
                   }});
  {
    Operand tokens = f("tokens", {B, T});
    tokens.kind = Kind::Tokens;
    cases.push_back({"embedding_forward", {f("out", {B, T, C}, Role::Out), tokens, f("wte", {Vp, C}), f("wpe", {T, C})},
                     [](Backend& be, const std::vector<Tensor>& t) { be.embedding_forward({t[0], t[1], t[2], t[3]}); }});
    cases.push_back({"embedding_backward",
                     {f("dwte", {Vp, C}, Role::InOut), f("dwpe", {T, C}, Role::InOut), f("dout", {B, T, C}), tokens},
                     [](Backend& be, const std::vector<Tensor>& t) { be.embedding_backward({t[0], t[1], t[2], t[3]}); }});
    Operand targets = f("targets", {B * T});
    targets.kind = Kind::Targets;
    Operand losses = f("losses", {B * T}, Role::Out);
    losses.kind = Kind::WideOnly;
    cases.push_back({"cross_entropy", {losses, f("dlogits", {B * T, Vp}, Role::Out), f("logits", {B * T, Vp}), targets},
                     [](Backend& be, const std::vector<Tensor>& t) {
                       CrossEntropyArgs ce;
                       ce.losses = t[0];
                       ce.dlogits = t[1];
                       ce.logits = t[2];
                       ce.targets = t[3];
                       ce.vocab_size = static_cast<int>(V);
                       ce.dloss = 0.125f;
                       be.cross_entropy(ce);
                     }});
  }
  {
    Operand params = f("params", {37}, Role::InOut), m = f("m", {37}, Role::InOut), v = f("v", {37}, Role::InOut);
    params.kind = m.kind = v.kind = Kind::WideOnly;
    v.positive = true;
    cases.push_back({"adamw_update", {params, f("grads", {37}), m, v}, [](Backend& be, const std::vector<Tensor>& t) {
                       AdamWArgs a;
                       a.params = t[0];
                       a.grads = t[1];
                       a.m = t[2];
                       a.v = t[3];
                       a.lr = 1e-2f;
                       a.weight_decay = 0.1f;
                       a.step = 3;
                       be.adamw_update(a);
                     }});
    Operand out = f("out", {1}, Role::Out);
    out.kind = Kind::WideOnly;
    cases.push_back({"sum_of_squares", {out, f("in", {53})},
                     [](Backend& be, const std::vector<Tensor>& t) { be.sum_of_squares({t[0], t[1]}); }});
  }
  return cases;
}

class NarrowOperands : public ::testing::TestWithParam<DType> {};

TEST_P(NarrowOperands, EveryOpMatchesFp64OnTheDecodedValues) {
  std::random_device rd;
  const uint32_t seed = rd();
  SCOPED_TRACE("seed " + std::to_string(seed));
  for (const OpCase& c : op_cases()) check_case(c, GetParam(), seed);
}

INSTANTIATE_TEST_SUITE_P(Formats, NarrowOperands, ::testing::Values(DType::BF16, DType::F16, DType::E4M3, DType::E5M2),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// out = (qa * a_inv) (qb * b_inv)^T with FP8 codes qa, qb: both inverse scales applied to the FP32
// accumulator, the output rounded to BF16 once.
TEST(Fp8Matmul, AppliesBothInverseScales) {
  const int64_t M = 13, K = 21, N = 9;
  std::vector<double> a = test::random_vector(M * K, 11, 3e-3), b = test::random_vector(N * K, 12, 40.0);
  Fp8Meta ma, mb;
  ma.scale = 448.0f / 0.01f;
  ma.scale_inv = 1.0f / ma.scale;
  mb.scale = 0.75f;
  mb.scale_inv = 1.0f / mb.scale;
  std::vector<uint8_t> qa(M * K), qb(N * K, 0), out_codes(M * N * 2, 0xFF);
  Tensor ta(qa.data(), {M, K}, DType::E4M3), tb(qb.data(), {N, K}, DType::E5M2);
  ta.scaling = &ma;
  tb.scaling = &mb;
  cpu_backend().cast({ta, test::view(a, {M, K})});
  cpu_backend().cast({tb, test::view(b, {N, K})});
  EXPECT_GT(ma.amax, 0.0f);
  const Tensor out(out_codes.data(), {M, N}, DType::BF16);
  cpu_backend().matmul({out, ta, tb, Tensor(), false, true});
  std::vector<double> da(M * K), db(N * K);
  for (int64_t i = 0; i < M * K; ++i) da[i] = e4m3_to_f32(qa[i]) / static_cast<double>(ma.scale);
  for (int64_t i = 0; i < N * K; ++i) db[i] = e5m2_to_f32(qb[i]) / static_cast<double>(mb.scale);
  const std::vector<double> got = decoded(out);
  double max_ref = 0.0, max_err = 0.0;
  for (int64_t i = 0; i < M; ++i) {
    for (int64_t j = 0; j < N; ++j) {
      double ref = 0.0;
      for (int64_t k = 0; k < K; ++k) ref += da[i * K + k] * db[j * K + k];
      max_ref = std::max(max_ref, std::abs(ref));
      max_err = std::max(max_err, std::abs(got[i * N + j] - ref));
    }
  }
  EXPECT_LE(max_err, tolerance(DType::BF16) * max_ref);
}

// An FP8 output stores convert(x * scale), saturating, and adds its inputs' amax and counts to the state.
TEST(Fp8Output, StoresWithItsScaleAndRecordsAmaxAndCounts) {
  std::vector<float> x = {0.0f, 1.0f, -2.5f, 1e-9f, 600.0f, -3.0f, 0.3f};
  const int64_t n = static_cast<int64_t>(x.size());
  Fp8Meta meta;
  meta.scale = 2.0f;
  meta.scale_inv = 0.5f;
  meta.amax = 1.0f;
  std::vector<uint8_t> codes(x.size(), 0xFF);
  Tensor out(codes.data(), {n}, DType::E4M3);
  out.scaling = &meta;
  cpu_backend().gelu_forward({out, Tensor(x.data(), {n})});
  std::vector<float> gelu(x.size());
  cpu_backend().gelu_forward({Tensor(gelu.data(), {n}), Tensor(x.data(), {n})});
  float amax = 1.0f;
  int underflows = 0, saturated = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_EQ(codes[i], f32_to_e4m3(gelu[i] * 2.0f, true)) << i;
    amax = std::max(amax, std::abs(gelu[i]));
    underflows += gelu[i] != 0.0f && (codes[i] & 0x7F) == 0;
    saturated += std::abs(gelu[i] * 2.0f) > 464.0f;
  }
  EXPECT_EQ(meta.amax, amax);
  EXPECT_EQ(meta.underflows, underflows);
  EXPECT_EQ(meta.saturated, saturated);
  EXPECT_GE(underflows, 1);
  EXPECT_EQ(saturated, 1);
  // Read back as an input, the tensor is its codes times scale_inv.
  std::vector<float> back(x.size());
  cpu_backend().cast({Tensor(back.data(), {n}), out});
  for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(back[i], e4m3_to_f32(codes[i]) * 0.5f) << i;
}

// The stores' fast paths (integer rounding in the normal range, BF16's branch-free one) give exactly the
// codes of the scalar rule, Fmt::encode, for every FP32 bit pattern class: random values over the whole
// exponent range, subnormals, overflow, +-0, +-inf and NaN, with and without an FP8 scale.
TEST(NarrowStore, FastPathsEqualTheScalarRule) {
  std::mt19937 rng(std::random_device{}());
  std::vector<float> x;
  for (int i = 0; i < 200000; ++i) {
    uint32_t u = static_cast<uint32_t>(rng());
    if (i % 3 == 0) u = (u & 0x807FFFFFu) | ((100u + rng() % 56u) << 23);  // around the narrow formats' range
    float v;
    std::memcpy(&v, &u, sizeof v);
    x.push_back(v);
  }
  for (float v : {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 448.0f, 464.0f, 57344.0f, 65504.0f, 65520.0f, 0x1p-133f,
                  0x1p-134f, 0x1p-24f, 0x1p-25f, 0x1.8p-25f, 0x1p-9f, 0x1p-10f, 3.4e38f})
    x.push_back(v);
  const int64_t n = static_cast<int64_t>(x.size());
  auto check = [&](DType format, float scale) {
    SCOPED_TRACE(std::string(dtype_name(format)) + " scale " + std::to_string(scale));
    std::vector<uint16_t> codes(x.size());
    Tensor out(codes.data(), {n}, format);
    Fp8Meta meta;
    meta.scale = scale;
    meta.scale_inv = 1.0f / scale;
    if (scale != 1.0f) out.scaling = &meta;
    cpu_backend().cast({out, Tensor(x.data(), {n})});
    visit_float_format(format, [&](auto fmt) {
      using Fmt = decltype(fmt);
      const auto* c = reinterpret_cast<const typename Fmt::Storage*>(codes.data());
      int64_t bad = 0;
      for (int64_t i = 0; i < n; ++i) {
        const auto want = Fmt::encode(x[static_cast<size_t>(i)] * scale, sizeof(typename Fmt::Storage) == 1);
        if (c[i] != want && bad++ < 5) ADD_FAILURE() << "x " << x[static_cast<size_t>(i)] << " code " << +c[i] << " want " << +want;
      }
      EXPECT_EQ(bad, 0);
    });
  };
  for (DType format : {DType::BF16, DType::F16, DType::E4M3, DType::E5M2}) check(format, 1.0f);
  for (DType format : {DType::E4M3, DType::E5M2}) check(format, 37.5f);
}

// Decoding, fast paths included (F16's vcvtph2ps where the build has AVX-512), gives every code of each
// format exactly the scalar rule's FP32 value, and a NaN for every NaN code (BF16's shift keeps the
// payload, the scalar rule gives the canonical NaN: both are NaN, which is all a kernel may rely on).
TEST(NarrowLoad, FastPathsEqualTheScalarRule) {
  for (DType format : {DType::BF16, DType::F16, DType::E4M3, DType::E5M2}) {
    SCOPED_TRACE(dtype_name(format));
    visit_float_format(format, [&](auto fmt) {
      using Fmt = decltype(fmt);
      using Storage = typename Fmt::Storage;
      const int64_t n = int64_t{1} << (8 * sizeof(Storage));
      std::vector<Storage> codes(static_cast<size_t>(n));
      for (int64_t c = 0; c < n; ++c) codes[static_cast<size_t>(c)] = static_cast<Storage>(c);
      std::vector<float> got(static_cast<size_t>(n));
      cpu_backend().cast({Tensor(got.data(), {n}), Tensor(codes.data(), {n}, format)});
      int64_t bad = 0;
      for (int64_t c = 0; c < n; ++c) {
        const float want_value = Fmt::decode(static_cast<Storage>(c)), value = got[static_cast<size_t>(c)];
        const uint32_t want = f32_bits(want_value), have = f32_bits(value);
        const bool same = std::isnan(want_value) ? std::isnan(value) : want == have;
        if (!same && bad++ < 5) ADD_FAILURE() << "code " << c << " bits " << have << " want " << want;
      }
      EXPECT_EQ(bad, 0);
    });
  }
}

// Current scaling: the scale from the tensor's own amax, computed by the backend, as fp8_scale_from_amax.
TEST(Fp8CurrentScale, SetsTheScaleFromTheTensorsAmax) {
  std::vector<double> x = test::random_vector(101, 5, 7.0);
  Fp8Meta meta;
  cpu_backend().fp8_current_scale({test::view(x, {101}), &meta, DType::E5M2, 1});
  double amax = 0.0;
  for (double v : x) amax = std::max(amax, std::abs(v));
  EXPECT_EQ(meta.scale, fp8_scale_from_amax(static_cast<float>(amax), 57344.0f, 1, 1.0f));
  EXPECT_EQ(meta.scale_inv, 1.0f / meta.scale);
  std::vector<float> zeros(8, 0.0f);
  const float before = meta.scale;
  cpu_backend().fp8_current_scale({Tensor(zeros.data(), {8}), &meta, DType::E4M3, 0});
  EXPECT_EQ(meta.scale, before);  // an all-zero tensor keeps the previous scale
}

}  // namespace
}  // namespace gpt
