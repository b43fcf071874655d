// Autoregressive sampling: temperature and top-k over the model's next-token distribution, with the
// context cut to the model's planned sequence length. (No KV cache yet: each token reruns the window.)
#pragma once

#include "core/random.h"
#include "model/gpt.h"

#include <vector>

namespace gpt {

struct SampleOptions {
  int tokens = 100;
  double temperature = 1.0;
  int top_k = 0;
};

// Returns the generated tokens (without the prompt). prompt must not be empty.
std::vector<int> generate(GPT& model, const std::vector<int>& prompt, const SampleOptions& options, HostRng& rng);

// Draws a token from logits (vocab_size entries) with temperature and top-k.
int sample_token(const std::vector<float>& logits, double temperature, int top_k, double uniform);

}  // namespace gpt
