// The kernels that read and write BF16 tensors in their own loops (cpu/bf16_elements.h: GELU, the
// embedding's tables, bias_backward's dout, LayerNorm, residual adds, attention, cross-entropy) give bit for
// bit the F32 op on the decoded values with each BF16 output rounded once: what staging them through FP32
// gave. Each case runs an op on BF16 tensors with the narrow recipes' F32 ones (LayerNorm statistics,
// attention probabilities, losses, F32 gradients) beside them, then the F32 op on the decoded values, and
// compares every output exactly. Inputs are fresh random values each run (the seed is printed on failure),
// outputs poisoned first; sizes are not multiples of 8 and exceed the kernels' parallel bars.
#include "cpu/gradcheck.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <random>
#include <string>
#include <vector>

namespace gpt {
namespace {

using test::cpu_backend;

// The BF16 codes of v (round to nearest even) and the FP32 values of BF16 codes, by the backend's cast.
std::vector<uint16_t> bf16_of(const std::vector<float>& v) {
  std::vector<uint16_t> codes(v.size());
  const auto n = static_cast<int64_t>(v.size());
  cpu_backend().cast({Tensor(codes.data(), {n}, DType::BF16), Tensor(const_cast<float*>(v.data()), {n})});
  return codes;
}

std::vector<float> f32_of(const std::vector<uint16_t>& codes) {
  std::vector<float> v(codes.size());
  const auto n = static_cast<int64_t>(codes.size());
  cpu_backend().cast({Tensor(v.data(), {n}), Tensor(const_cast<uint16_t*>(codes.data()), {n}, DType::BF16)});
  return v;
}

std::vector<uint16_t> random_bf16(size_t n, uint32_t seed, double scale = 1.0) {
  return bf16_of(test::to_f32(test::random_vector(n, seed, scale)));
}

// Poison: all bits set, NaN as BF16 and as FP32.
std::vector<uint16_t> poisoned_bf16(size_t n) { return std::vector<uint16_t>(n, 0xFFFF); }
std::vector<float> poisoned_f32(size_t n) {
  const uint32_t ones = 0xFFFFFFFFu;
  float nan;
  std::memcpy(&nan, &ones, sizeof nan);
  return std::vector<float>(n, nan);
}

Tensor bf16_view(std::vector<uint16_t>& codes, std::initializer_list<int64_t> dims) {
  Tensor t(codes.data(), dims, DType::BF16);
  GPT_CHECK(static_cast<size_t>(t.numel()) == codes.size(), "view {} over {} codes", t.shape_string(), codes.size());
  return t;
}

// Bitwise equality of FP32 vectors (NaN patterns included), first mismatch reported.
void expect_same_bits(const std::vector<float>& got, const std::vector<float>& want, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    uint32_t a, b;
    std::memcpy(&a, &got[i], 4);
    std::memcpy(&b, &want[i], 4);
    ASSERT_EQ(a, b) << what << " element " << i << ": " << got[i] << " vs " << want[i];
  }
}

uint32_t fresh_seed() { return std::random_device{}(); }

DropoutSpec dropout(float p, uint32_t seed, RngSite site) { return {p, RngStream{seed, 3, 1, 0, site}}; }

TEST(Bf16InPlaceKernels, GeluEmbeddingAndBiasBackward) {
  const uint32_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  cpu::CpuBackend& be = cpu_backend();
  // Beyond the kernels' parallel bar (2^14), with values up to where GELU saturates and its gradient vanishes.
  const int64_t n = 3 * (1 << 13) + 7;
  std::vector<uint16_t> x = random_bf16(n, seed, 6.0), dy = random_bf16(n, seed + 1);
  std::vector<float> xf = f32_of(x), dyf = f32_of(dy);
  const Tensor x_t = bf16_view(x, {n}), dy_t = bf16_view(dy, {n});

  std::vector<uint16_t> out = poisoned_bf16(n), din = poisoned_bf16(n);
  std::vector<float> out_f(n), din_f(n);
  be.gelu_forward({bf16_view(out, {n}), x_t});
  be.gelu_forward({test::view(out_f, {n}), test::view(xf, {n})});
  EXPECT_EQ(out, bf16_of(out_f));
  be.gelu_backward({bf16_view(din, {n}), dy_t, x_t});
  be.gelu_backward({test::view(din_f, {n}), test::view(dyf, {n}), test::view(xf, {n})});
  EXPECT_EQ(din, bf16_of(din_f));

  // bias_backward sums a BF16 dout in place into an F32 dbias: the F32 op's sums exactly.
  const int64_t rows = 803, cols = 29;  // within dy, beyond the parallel bar
  std::vector<float> dbias(cols, 0.5f), dbias_f(cols, 0.5f);
  be.bias_backward({test::view(dbias, {cols}), Tensor(dy.data(), {rows, cols}, DType::BF16)});
  be.bias_backward({test::view(dbias_f, {cols}), Tensor(dyf.data(), {rows, cols})});
  expect_same_bits(dbias, dbias_f, "dbias");

  const int64_t B = 3, T = 5, C = 37, V = 11;
  std::vector<int32_t> tokens(B * T);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>((i * 7 + seed) % V);
  std::vector<uint16_t> wte = random_bf16(V * C, seed + 2), wpe = random_bf16(T * C, seed + 3);
  std::vector<float> wte_f = f32_of(wte), wpe_f = f32_of(wpe);
  const Tensor tok = test::view(tokens, {B, T});
  for (const float p : {0.0f, 0.25f}) {
    SCOPED_TRACE("dropout " + std::to_string(p));
    const DropoutSpec drop = dropout(p, seed, RngSite::Embedding);
    std::vector<uint16_t> emb = poisoned_bf16(B * T * C);
    std::vector<float> emb_f(B * T * C);
    be.embedding_forward({bf16_view(emb, {B, T, C}), tok, bf16_view(wte, {V, C}), bf16_view(wpe, {T, C}), drop});
    be.embedding_forward({test::view(emb_f, {B, T, C}), tok, test::view(wte_f, {V, C}), test::view(wpe_f, {T, C}), drop});
    EXPECT_EQ(emb, bf16_of(emb_f));
  }
}

// LayerNorm with BF16 activations, weight and bias and F32 statistics; backward into F32 and into BF16
// parameter gradients (precision.grad_dtype), the input gradient accumulated into a BF16 din.
TEST(Bf16InPlaceKernels, LayerNorm) {
  const uint32_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  cpu::CpuBackend& be = cpu_backend();
  const int64_t B = 3, T = 41, C = 151;  // 18573 elements; C spans two full column blocks of 64 and a part
  std::vector<uint16_t> in = random_bf16(B * T * C, seed, 2.0), w = random_bf16(C, seed + 1), b = random_bf16(C, seed + 2);
  std::vector<float> in_f = f32_of(in), w_f = f32_of(w), b_f = f32_of(b);

  std::vector<uint16_t> out = poisoned_bf16(B * T * C);
  std::vector<float> mean = poisoned_f32(B * T), rstd = poisoned_f32(B * T);
  std::vector<float> out_f(B * T * C), mean_f(B * T), rstd_f(B * T);
  be.layernorm_forward({bf16_view(out, {B, T, C}), test::view(mean, {B, T}), test::view(rstd, {B, T}), bf16_view(in, {B, T, C}),
                        bf16_view(w, {C}), bf16_view(b, {C})});
  be.layernorm_forward({test::view(out_f, {B, T, C}), test::view(mean_f, {B, T}), test::view(rstd_f, {B, T}),
                        test::view(in_f, {B, T, C}), test::view(w_f, {C}), test::view(b_f, {C})});
  EXPECT_EQ(out, bf16_of(out_f));
  expect_same_bits(mean, mean_f, "mean");
  expect_same_bits(rstd, rstd_f, "rstd");

  std::vector<uint16_t> dout = random_bf16(B * T * C, seed + 3), din = random_bf16(B * T * C, seed + 4);
  std::vector<float> dout_f = f32_of(dout), din_f = f32_of(din);
  std::vector<float> dw(C, 0.25f), db(C, -0.5f), dw_f(C, 0.25f), db_f(C, -0.5f);
  std::vector<uint16_t> dw16 = random_bf16(C, seed + 5), db16 = random_bf16(C, seed + 6);
  std::vector<float> dw16_f = f32_of(dw16), db16_f = f32_of(db16);
  std::vector<uint16_t> din2 = din;
  be.layernorm_backward({bf16_view(din, {B, T, C}), test::view(dw, {C}), test::view(db, {C}), bf16_view(dout, {B, T, C}),
                         bf16_view(in, {B, T, C}), bf16_view(w, {C}), test::view(mean, {B, T}), test::view(rstd, {B, T})});
  be.layernorm_backward({bf16_view(din2, {B, T, C}), bf16_view(dw16, {C}), bf16_view(db16, {C}), bf16_view(dout, {B, T, C}),
                         bf16_view(in, {B, T, C}), bf16_view(w, {C}), test::view(mean, {B, T}), test::view(rstd, {B, T})});
  std::vector<float> dw16_ref = dw16_f, db16_ref = db16_f;
  be.layernorm_backward({test::view(din_f, {B, T, C}), test::view(dw_f, {C}), test::view(db_f, {C}),
                         test::view(dout_f, {B, T, C}), test::view(in_f, {B, T, C}), test::view(w_f, {C}),
                         test::view(mean_f, {B, T}), test::view(rstd_f, {B, T})});
  EXPECT_EQ(din, bf16_of(din_f));
  EXPECT_EQ(din2, bf16_of(din_f));
  expect_same_bits(dw, dw_f, "dweight");
  expect_same_bits(db, db_f, "dbias");
  // The BF16 gradients: the F32 op from their decoded values, rounded once.
  std::vector<float> scratch_din = f32_of(random_bf16(B * T * C, seed + 4));
  be.layernorm_backward({test::view(scratch_din, {B, T, C}), test::view(dw16_ref, {C}), test::view(db16_ref, {C}),
                         test::view(dout_f, {B, T, C}), test::view(in_f, {B, T, C}), test::view(w_f, {C}),
                         test::view(mean_f, {B, T}), test::view(rstd_f, {B, T})});
  EXPECT_EQ(dw16, bf16_of(dw16_ref));
  EXPECT_EQ(db16, bf16_of(db16_ref));
}

TEST(Bf16InPlaceKernels, ResidualAdds) {
  const uint32_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  cpu::CpuBackend& be = cpu_backend();
  const int64_t n = 5 * (1 << 12) + 3;  // beyond the parallel bar; the mask's chunks of 4096 end mid-way
  std::vector<uint16_t> res = random_bf16(n, seed), x = random_bf16(n, seed + 1, 0.01);
  std::vector<float> res_f = f32_of(res), x_f = f32_of(x);
  for (const float p : {0.0f, 0.3f}) {
    SCOPED_TRACE("dropout " + std::to_string(p));
    const DropoutSpec drop = dropout(p, seed, RngSite::AttentionResidual);
    std::vector<uint16_t> out = poisoned_bf16(n);
    std::vector<float> out_f(n);
    be.residual_forward({bf16_view(out, {n}), bf16_view(res, {n}), bf16_view(x, {n}), drop});
    be.residual_forward({test::view(out_f, {n}), test::view(res_f, {n}), test::view(x_f, {n}), drop});
    EXPECT_EQ(out, bf16_of(out_f));
    // In place over the residual, as the model's LoRA path adds.
    std::vector<uint16_t> sum = res;
    be.residual_forward({bf16_view(sum, {n}), bf16_view(sum, {n}), bf16_view(x, {n}), drop});
    EXPECT_EQ(sum, out);

    std::vector<uint16_t> dx = poisoned_bf16(n);
    std::vector<float> dx_f(n);
    be.residual_backward({bf16_view(dx, {n}), bf16_view(res, {n}), drop});
    be.residual_backward({test::view(dx_f, {n}), test::view(res_f, {n}), drop});
    EXPECT_EQ(dx, bf16_of(dx_f));
  }
}

// BF16 qkv, out, dout and dqkv with F32 probs and dprobs; T spans two of the kernels' 64-row blocks.
TEST(Bf16InPlaceKernels, Attention) {
  const uint32_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  cpu::CpuBackend& be = cpu_backend();
  const int64_t B = 2, T = 70, NH = 3, C = 3 * 13;
  std::vector<uint16_t> qkv = random_bf16(B * T * 3 * C, seed), dout = random_bf16(B * T * C, seed + 1);
  std::vector<float> qkv_f = f32_of(qkv), dout_f = f32_of(dout);
  for (const float p : {0.0f, 0.2f}) {
    SCOPED_TRACE("dropout " + std::to_string(p));
    const DropoutSpec drop = dropout(p, seed, RngSite::AttentionProbs);
    std::vector<uint16_t> out = poisoned_bf16(B * T * C);
    std::vector<float> probs = poisoned_f32(B * NH * T * T), out_f(B * T * C), probs_f(B * NH * T * T);
    be.attention_forward({bf16_view(out, {B, T, C}), test::view(probs, {B, NH, T, T}), bf16_view(qkv, {B, T, 3 * C}),
                          static_cast<int>(NH), drop});
    be.attention_forward({test::view(out_f, {B, T, C}), test::view(probs_f, {B, NH, T, T}), test::view(qkv_f, {B, T, 3 * C}),
                          static_cast<int>(NH), drop});
    EXPECT_EQ(out, bf16_of(out_f));
    expect_same_bits(probs, probs_f, "probs");

    std::vector<uint16_t> dqkv = poisoned_bf16(B * T * 3 * C);
    std::vector<float> dprobs = poisoned_f32(B * NH * T * T), dqkv_f(B * T * 3 * C), dprobs_f(B * NH * T * T);
    be.attention_backward({bf16_view(dqkv, {B, T, 3 * C}), test::view(dprobs, {B, NH, T, T}), bf16_view(dout, {B, T, C}),
                           bf16_view(qkv, {B, T, 3 * C}), test::view(probs, {B, NH, T, T}), static_cast<int>(NH), drop});
    be.attention_backward({test::view(dqkv_f, {B, T, 3 * C}), test::view(dprobs_f, {B, NH, T, T}),
                           test::view(dout_f, {B, T, C}), test::view(qkv_f, {B, T, 3 * C}),
                           test::view(probs_f, {B, NH, T, T}), static_cast<int>(NH), drop});
    EXPECT_EQ(dqkv, bf16_of(dqkv_f));
    expect_same_bits(dprobs, dprobs_f, "dprobs");
  }
}

// BF16 logits with F32 losses: the loss alone, and with dlogits written over the logits as the model does.
TEST(Bf16InPlaceKernels, CrossEntropy) {
  const uint32_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  cpu::CpuBackend& be = cpu_backend();
  const int64_t N = 37, V = 301, Vp = 320;
  const std::vector<uint16_t> logits = random_bf16(N * Vp, seed, 3.0);
  std::vector<int32_t> targets = test::random_tokens(N, static_cast<int32_t>(V), seed + 1);
  targets[5] = -1;  // the ignore index
  targets[9] = static_cast<int32_t>(V - 1);
  std::vector<float> logits_f = f32_of(logits);
  const Tensor tgt = test::view(targets, {N});
  const float dloss = 1.0f / 36.0f;

  std::vector<uint16_t> x = logits;
  std::vector<float> losses = poisoned_f32(N), losses_f(N);
  CrossEntropyArgs eval{test::view(losses, {N}), Tensor(), bf16_view(x, {N, Vp}), tgt, static_cast<int>(V), 0.0f};
  be.cross_entropy(eval);
  CrossEntropyArgs eval_f{test::view(losses_f, {N}), Tensor(), test::view(logits_f, {N, Vp}), tgt, static_cast<int>(V), 0.0f};
  be.cross_entropy(eval_f);
  expect_same_bits(losses, losses_f, "losses without dlogits");
  EXPECT_EQ(x, logits);

  std::vector<float> train_losses = poisoned_f32(N), train_losses_f(N);
  CrossEntropyArgs train{test::view(train_losses, {N}), bf16_view(x, {N, Vp}), bf16_view(x, {N, Vp}), tgt, static_cast<int>(V), dloss};
  be.cross_entropy(train);
  CrossEntropyArgs train_f{test::view(train_losses_f, {N}), test::view(logits_f, {N, Vp}), test::view(logits_f, {N, Vp}), tgt,
                           static_cast<int>(V), dloss};
  be.cross_entropy(train_f);
  expect_same_bits(train_losses, losses_f, "losses");
  expect_same_bits(train_losses_f, losses_f, "the F32 op's losses with and without dlogits");
  EXPECT_EQ(x, bf16_of(logits_f));
}

}  // namespace
}  // namespace gpt
