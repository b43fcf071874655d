// What the KV-cache decoder tests share (tests/model on the CPU, tests/cuda/model on CUDA): random weights,
// a random window of tokens, the full (uncached) forward's logits and the decoder's, and their difference.
#pragma once

#include "model/gpt.h"
#include "model/kv_cache_decoder.h"
#include "precision/recipe.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace gpt::test {

// GPT-2's initialisation from seed with noise on every parameter (biases and gains too), so every parameter
// reaches the logits. The initialisation is drawn on the host, so every backend gets the same weights.
inline void randomise(GPT& model, uint32_t seed) {
  model.init_weights(seed);
  std::vector<float> params = model.parameters_to_host();
  std::mt19937 rng(seed);
  std::normal_distribution<float> noise(0.0f, 0.1f);
  for (float& p : params) p += noise(rng);
  model.parameters_from_host(params);
}

// A context's worth of tokens drawn from seed.
inline std::vector<int32_t> random_window(const ModelConfig& m, uint32_t seed) {
  std::vector<int32_t> tokens(static_cast<size_t>(m.context_length));
  std::mt19937 rng(seed);
  for (int32_t& t : tokens) t = static_cast<int32_t>(rng() % static_cast<uint32_t>(m.vocab_size));
  return tokens;
}

// The full (uncached) forward's logits at every position of the window.
inline std::vector<std::vector<float>> full_forward_logits(GPT& model, const std::vector<int32_t>& tokens) {
  StepContext ctx;
  ctx.training = false;
  const int T = static_cast<int>(tokens.size());
  model.forward(tokens, {}, 1, T, ctx);
  std::vector<std::vector<float>> full;
  for (int t = 0; t < T; ++t) full.push_back(model.logits_at(0, t));
  return full;
}

// The decoder's logits at every position of the window, one decoder from position 0.
inline std::vector<std::vector<float>> cached_logits(GPT& model, const std::vector<int32_t>& tokens) {
  KvCacheDecoder decoder(model);
  std::vector<std::vector<float>> out;
  for (const int32_t token : tokens) {
    const std::span<const float> logits = decoder.append(token);
    out.emplace_back(logits.begin(), logits.end());
  }
  return out;
}

// The largest |a - b| / (1 + |b|) over every position and token; a NaN or infinity in a fails the test.
inline double worst_relative(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b) {
  double worst = 0.0;
  for (size_t t = 0; t < b.size(); ++t)
    for (size_t v = 0; v < b[t].size(); ++v) {
      EXPECT_TRUE(std::isfinite(a[t][v])) << "position " << t << " token " << v;
      worst = std::max(worst, std::abs(static_cast<double>(a[t][v]) - b[t][v]) / (1.0 + std::abs(b[t][v])));
    }
  return worst;
}

inline PrecisionRecipe recipe_of(RecipeKind kind, Fp8ScalingMode scaling = Fp8ScalingMode::Delayed) {
  PrecisionRecipe r;
  r.recipe = kind;
  r.fp8.scaling.mode = scaling;
  return r;
}

}  // namespace gpt::test
