#include "model/kv_cache_decoder.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "cpu/gradcheck.h"
#include "test_util.h"
#include "train/sampler.h"

namespace gpt::test {
namespace {

using ::testing::HasSubstr;

// Random weights everywhere (biases and gains too), so every parameter reaches the logits.
void randomise(GPT& model, uint32_t seed) {
  model.init_weights(seed);
  std::vector<float> params = model.parameters_to_host();
  std::mt19937 rng(seed);
  std::normal_distribution<float> noise(0.0f, 0.1f);
  for (float& p : params) p += noise(rng);
  model.parameters_from_host(params);
}

ModelConfig decoder_model() { return tiny_model(37, 2, 24, 3, 12); }

// Every position's logits against the full forward over the same tokens: not bitwise (a 1-row product and
// a per-head softmax instead of the batched attention sum in other orders), within 2e-5 (1 + |logit|).
TEST(KvCacheDecoder, LogitsMatchTheFullForwardAtEveryPosition) {
  const ModelConfig m = decoder_model();
  GPT model(m, 1, m.context_length, cpu_backend());
  randomise(model, 3);
  std::vector<int32_t> tokens(m.context_length);
  std::mt19937 rng(5);
  for (int32_t& t : tokens) t = static_cast<int32_t>(rng() % m.vocab_size);
  StepContext ctx;
  ctx.training = false;
  model.forward(tokens, {}, 1, m.context_length, ctx);
  std::vector<std::vector<float>> full;
  for (int t = 0; t < m.context_length; ++t) full.push_back(model.logits_at(0, t));

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

TEST(KvCacheDecoder, RefillsWhenTheContextIsFull) {
  const ModelConfig m = decoder_model();
  GPT model(m, 1, m.context_length, cpu_backend());
  randomise(model, 6);
  HostRng rng(1, 0);
  const std::vector<int> long_prompt(15, 7);  // longer than the 12 positions
  const std::vector<int> out = generate_cached(model, long_prompt, {14, 1.0, 0, 1.0}, rng);
  ASSERT_EQ(out.size(), 14u);
  for (const int t : out) EXPECT_TRUE(t >= 0 && t < m.vocab_size);
}

TEST(KvCacheDecoder, RefusesNarrowRecipes) {
  const ModelConfig m = decoder_model();
  PrecisionRecipe bf16;
  bf16.recipe = RecipeKind::Bf16;
  GPT model(m, 1, m.context_length, cpu_backend(), DType::F32, {}, bf16);
  EXPECT_THAT(error_message([&] { KvCacheDecoder decoder(model); }), HasSubstr("FP32 weights"));
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
