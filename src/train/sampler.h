// Autoregressive sampling: temperature, top-k and top-p (nucleus) over the model's next-token distribution.
// generate_cached runs one position per token over a KV cache (model/kv_cache_decoder.h); generate reruns
// the whole window for every token, with the context cut to the model's planned sequence length.
#pragma once

#include "core/random.h"
#include "model/gpt.h"

#include <functional>
#include <span>
#include <vector>

namespace gpt {

struct SampleOptions {
  int tokens = 100;
  double temperature = 1.0;
  int top_k = 0;       // 0: all tokens
  double top_p = 1.0;  // 1: no nucleus cut
};

// Returns the generated tokens (without the prompt). prompt must not be empty.
std::vector<int> generate(GPT& model, const std::vector<int>& prompt, const SampleOptions& options, HostRng& rng);

// The same draws from the same logits, computed with a KV cache; on_token (if set) sees each token as it is
// drawn. The cache holds model.context_length positions: when it is full, it is refilled with the newest
// half of them (one forward per refilled position), so past that length the model sees between half and
// all of context_length tokens, where generate would always see its whole window.
std::vector<int> generate_cached(GPT& model, const std::vector<int>& prompt, const SampleOptions& options,
                                 HostRng& rng, const std::function<void(int)>& on_token = {});

// Draws a token from logits (vocab_size entries): the top_k most likely (ties to the lower id), then the
// smallest prefix of those whose probability at this temperature reaches top_p, renormalised.
int sample_token(std::span<const float> logits, double temperature, int top_k, double uniform, double top_p = 1.0);

}  // namespace gpt
