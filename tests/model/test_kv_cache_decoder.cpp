#include "model/kv_cache_decoder.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdio>

#include "backend/forwarding_backend.h"
#include "cpu/gradcheck.h"
#include "model/kv_cache_test_util.h"
#include "test_util.h"
#include "train/sampler.h"

namespace gpt::test {
namespace {

using ::testing::HasSubstr;

ModelConfig decoder_model() { return tiny_model(37, 2, 24, 3, 12); }

// Every position's logits against the full forward over the same tokens: not bitwise (a 1-row product and
// a per-head softmax instead of the batched attention sum in other orders), within 2e-5 (1 + |logit|).
TEST(KvCacheDecoder, LogitsMatchTheFullForwardAtEveryPosition) {
  const ModelConfig m = decoder_model();
  GPT model(m, 1, m.context_length, cpu_backend());
  randomise(model, 3);
  const std::vector<int32_t> tokens = random_window(m, 5);
  const std::vector<std::vector<float>> full = full_forward_logits(model, tokens);

  KvCacheDecoder decoder(model);
  std::vector<float> first;
  for (int t = 0; t < m.context_length; ++t) {
    const std::span<const float> logits = decoder.append(tokens[static_cast<size_t>(t)]);
    ASSERT_EQ(logits.size(), static_cast<size_t>(m.vocab_size));
    if (t == 0) first.assign(logits.begin(), logits.end());
    for (int v = 0; v < m.vocab_size; ++v)
      ASSERT_LE(std::abs(logits[static_cast<size_t>(v)] - full[t][v]), 2e-5 * (1.0 + std::abs(full[t][v])))
          << "position " << t << " token " << v;
  }
  EXPECT_EQ(decoder.length(), m.context_length);
  EXPECT_THAT(error_message([&] { decoder.append(1); }), HasSubstr("KV cache is full"));
  decoder.reset();
  const std::span<const float> again = decoder.append(tokens[0]);
  EXPECT_EQ(std::vector<float>(again.begin(), again.end()), first);
}

TEST(KvCacheDecoder, SamplesTheTokensTheUncachedSamplerDraws) {
  const ModelConfig m = decoder_model();
  GPT model(m, 1, m.context_length, cpu_backend());
  randomise(model, 4);
  const std::vector<int> prompt{3, 1, 4};
  for (const SampleOptions options : {SampleOptions{9, 1.0, 1, 1.0}, SampleOptions{9, 0.8, 0, 1.0},
                                      SampleOptions{9, 1.2, 10, 0.9}}) {
    HostRng a(11, 0), b(11, 0);
    std::vector<int> streamed;
    const std::vector<int> cached = generate_cached(model, prompt, options, a, [&](int t) { streamed.push_back(t); });
    EXPECT_EQ(cached, generate(model, prompt, options, b)) << "top_k " << options.top_k << " top_p " << options.top_p;
    EXPECT_EQ(streamed, cached);
    EXPECT_EQ(cached.size(), 9u);
  }
}

// Past the context the cache keeps the newest half of the window and refills from there; the reference
// reruns exactly those windows through the full forward, so greedy decoding must agree token for token.
TEST(KvCacheDecoder, SlidesPastTheContextByRefillingTheNewestHalf) {
  const ModelConfig m = decoder_model();
  GPT model(m, 1, m.context_length, cpu_backend());
  randomise(model, 6);
  std::vector<int> prompt(15);  // longer than the 12 positions
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int>((i * 7 + 3) % m.vocab_size);
  const int tokens = 3 * m.context_length;
  HostRng rng(1, 0);
  const std::vector<int> out = generate_cached(model, prompt, {tokens, 1.0, 1, 1.0}, rng);
  ASSERT_EQ(out.size(), static_cast<size_t>(tokens));

  std::vector<int> all = prompt;
  size_t window = std::min(all.size(), static_cast<size_t>(m.context_length));
  StepContext ctx;
  ctx.training = false;
  int refills = 0;
  for (int i = 0; i < tokens; ++i) {
    const std::vector<int32_t> seen(all.end() - static_cast<std::ptrdiff_t>(window), all.end());
    model.forward(seen, {}, 1, static_cast<int>(window), ctx);
    const int next = sample_token(model.logits_at(0, static_cast<int>(window) - 1), 1.0, 1, 0.5);
    ASSERT_EQ(out[static_cast<size_t>(i)], next) << "token " << i << " after a window of " << window;
    all.push_back(next);
    if (window == static_cast<size_t>(m.context_length)) {
      window = static_cast<size_t>(m.context_length / 2);
      ++refills;
    } else {
      ++window;
    }
  }
  EXPECT_GE(refills, 4);
}

struct NarrowCase {
  const char* name;
  PrecisionRecipe recipe;
  double tolerance;  // on |cached - full| / (1 + |full|), the full forward in the same recipe
};

// The narrow recipes decode in their own formats. Against the full forward in the same recipe the logits
// may differ where a 1-row product's FP32 sum rounds to the other side of a narrow value (a BF16 qkv or
// attention output one ulp apart, then carried through the blocks), so the bound is a few of the format's
// ulps: BF16 2^-8, FP16 2^-11, E4M3 2^-3 for the FP8 blocks' inputs (on this model they agree bit for bit).
// fp8 current scaling scales each position by its own amax where the full forward takes the window's, a
// difference of the recipe's own size (0.08 here; fp8 against fp32 differs by 0.04-0.16 on logits near 1).
// Greedy decoding agrees token for token.
TEST(KvCacheDecoder, DecodesEveryRecipeInItsOwnFormats) {
  const ModelConfig m = decoder_model();
  for (const NarrowCase& c : {NarrowCase{"bf16", recipe_of(RecipeKind::Bf16), 4e-2},
                              NarrowCase{"fp16", recipe_of(RecipeKind::Fp16), 5e-3},
                              NarrowCase{"fp8 delayed", recipe_of(RecipeKind::Fp8), 1e-1},
                              NarrowCase{"fp8 current", recipe_of(RecipeKind::Fp8, Fp8ScalingMode::Current), 2e-1}}) {
    SCOPED_TRACE(c.name);
    GPT model(m, 1, m.context_length, cpu_backend(), DType::F32, {}, c.recipe);
    randomise(model, 8);
    ASSERT_TRUE(KvCacheDecoder::supports(model));
    const std::vector<int32_t> tokens = random_window(m, 9);
    const std::vector<std::vector<float>> full = full_forward_logits(model, tokens);
    double worst = 0.0;
    {
      KvCacheDecoder decoder(model);
      for (int t = 0; t < m.context_length; ++t) {
        const std::span<const float> logits = decoder.append(tokens[static_cast<size_t>(t)]);
        for (int v = 0; v < m.vocab_size; ++v) {
          ASSERT_TRUE(std::isfinite(logits[static_cast<size_t>(v)])) << "position " << t << " token " << v;
          worst = std::max(worst, std::abs(logits[static_cast<size_t>(v)] - full[t][v]) / (1.0 + std::abs(full[t][v])));
        }
      }
    }
    EXPECT_LE(worst, c.tolerance);
    // The decoder leaves the model as it found it (FP8 scales and statistics included): the same forward
    // again gives the same logits, bit for bit.
    const std::vector<std::vector<float>> again = full_forward_logits(model, tokens);
    for (int t = 0; t < m.context_length; ++t) ASSERT_EQ(again[t], full[t]) << "position " << t;
    std::printf("%s: worst relative logit difference %.3g (bound %.3g)\n", c.name, worst, c.tolerance);

    const std::vector<int> prompt{3, 1, 4};
    HostRng a(11, 0), b(11, 0);
    const SampleOptions greedy{9, 1.0, 1, 1.0};
    EXPECT_EQ(generate_cached(model, prompt, greedy, a), generate(model, prompt, greedy, b));
  }
}

// Under LoRA the decoder adds each adapter's term after its base product, as the forward does: random
// adapters (B nonzero) on every target and on two of the four, in fp32, bf16 and fp16, against the full
// forward with the bounds above; and after the adapters change (a training step), a new decoder decodes
// the new ones, so the compute copy it reads is refreshed.
TEST(KvCacheDecoder, DecodesLoraModelsWithTheirAdapters) {
  const ModelConfig m = decoder_model();
  struct LoraCase {
    const char* name;
    PrecisionRecipe recipe;
    double tolerance;
    std::array<bool, 4> targets;
  };
  for (const LoraCase& c : {LoraCase{"fp32, every target", recipe_of(RecipeKind::Fp32), 2e-5, {true, true, true, true}},
                            LoraCase{"fp32, qkv and fc", recipe_of(RecipeKind::Fp32), 2e-5, {true, false, true, false}},
                            LoraCase{"bf16", recipe_of(RecipeKind::Bf16), 4e-2, {true, true, true, true}},
                            LoraCase{"fp16", recipe_of(RecipeKind::Fp16), 5e-3, {false, true, false, true}}}) {
    SCOPED_TRACE(c.name);
    LoraSpec spec;
    spec.rank = 3;
    spec.alpha = 6.0;
    spec.targets = c.targets;
    GPT model(m, 1, m.context_length, cpu_backend(), DType::F32, {}, c.recipe, spec);
    randomise(model, 12);
    ASSERT_TRUE(KvCacheDecoder::supports(model));
    const std::vector<int32_t> tokens = random_window(m, 13);
    for (int round = 0; round < 2; ++round) {
      if (round == 1) {
        std::vector<float> adapters = model.parameters_to_host();
        for (size_t i = 0; i < adapters.size(); ++i) adapters[i] += 0.05f * static_cast<float>((i * 7919) % 13) - 0.3f;
        model.parameters_from_host(adapters);
      }
      // The decoder goes first, so that it, not a forward before it, refreshes the adapters' compute copy.
      const std::vector<std::vector<float>> cached = cached_logits(model, tokens);
      const double worst = worst_relative(cached, full_forward_logits(model, tokens));
      EXPECT_LE(worst, c.tolerance) << "round " << round;
      std::printf("LoRA %s, round %d: worst relative logit difference %.3g (bound %.3g)\n", c.name, round, worst,
                  c.tolerance);
    }
    const std::vector<int> prompt{3, 1, 4};
    HostRng a(11, 0), b(11, 0);
    const SampleOptions greedy{9, 1.0, 1, 1.0};
    EXPECT_EQ(generate_cached(model, prompt, greedy, a), generate(model, prompt, greedy, b));
  }
}

// The CPU backend, saying its products take only some operand formats (as cuBLASLt's do).
class LimitedProductsBackend final : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  std::string name() const override { return "limited"; }
  BackendCapabilities capabilities() const override {
    BackendCapabilities c = ForwardingBackend::capabilities();
    c.one_row_products_of_any_formats = false;
    return c;
  }
};

// Such a backend decodes FP32 with the cache and refuses it, naming the way out, for a narrow recipe.
TEST(KvCacheDecoder, NarrowRecipesNeedOneRowProductsOfAnyFormats) {
  const ModelConfig m = decoder_model();
  LimitedProductsBackend limited(cpu_backend());
  GPT fp32(m, 1, m.context_length, limited);
  EXPECT_TRUE(KvCacheDecoder::supports(fp32));
  GPT bf16(m, 1, m.context_length, limited, DType::F32, {}, recipe_of(RecipeKind::Bf16));
  EXPECT_FALSE(KvCacheDecoder::supports(bf16));
  EXPECT_THAT(error_message([&] { KvCacheDecoder decoder(bf16); }), HasSubstr("sample without the cache"));
}

TEST(Sampler, TopPKeepsTheSmallestNucleus) {
  // Probabilities 0.4, 0.3, 0.2, 0.1 at temperature 1.
  const std::vector<float> logits{std::log(0.3f), std::log(0.4f), std::log(0.1f), std::log(0.2f)};
  // Nothing cut: the inverse CDF in id order, 0.3 | 0.4 | 0.1 | 0.2.
  EXPECT_EQ(sample_token(logits, 1.0, 0, 0.99, 1.0), 3);
  EXPECT_EQ(sample_token(logits, 1.0, 0, 0.29, 1.0), 0);
  EXPECT_EQ(sample_token(logits, 1.0, 0, 0.31, 1.0), 1);
  // top_k 3 keeps 1, 0, 3 in that order: 0.4 | 0.3 | 0.2 of 0.9.
  EXPECT_EQ(sample_token(logits, 1.0, 3, 0.99, 1.0), 3);
  EXPECT_EQ(sample_token(logits, 1.0, 3, 0.50, 1.0), 0);
  // top_p 0.5 keeps tokens 1 and 0 (0.4 + 0.3 reach it), renormalised to 4/7 and 3/7.
  EXPECT_EQ(sample_token(logits, 1.0, 0, 0.99, 0.5), 0);
  EXPECT_EQ(sample_token(logits, 1.0, 0, 0.5, 0.5), 1);
  EXPECT_EQ(sample_token(logits, 1.0, 0, 0.58, 0.5), 0);
  EXPECT_EQ(sample_token(logits, 1.0, 0, 0.99, 0.01), 1);
  EXPECT_THAT(error_message([&] { sample_token(logits, 1.0, 0, 0.5, 0.0); }), HasSubstr("top_p is 0"));
}

}  // namespace
}  // namespace gpt::test
