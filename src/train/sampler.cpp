#include "train/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "model/kv_cache_decoder.h"

namespace gpt {

int sample_token(std::span<const float> logits, double temperature, int top_k, double uniform, double top_p) {
  GPT_CHECK(!logits.empty() && temperature > 0.0, "sampling needs logits and a positive temperature");
  GPT_CHECK(top_p > 0.0 && top_p <= 1.0, "top_p is {}, expected a value in (0, 1]", top_p);
  const int V = static_cast<int>(logits.size());
  if ((top_k <= 0 || top_k >= V) && top_p >= 1.0) {
    // Nothing is cut, so no order is needed: the inverse CDF in id order, O(V) instead of a sort of V.
    const float max_logit = *std::max_element(logits.begin(), logits.end());
    std::vector<double> weights(static_cast<size_t>(V));
    double total = 0.0;
    for (int i = 0; i < V; ++i) total += weights[i] = std::exp((logits[i] - max_logit) / temperature);
    double target = uniform * total;
    for (int i = 0; i < V; ++i) {
      target -= weights[i];
      if (target <= 0.0) return i;
    }
    return V - 1;
  }
  std::vector<int> order(V);
  std::iota(order.begin(), order.end(), 0);
  const int k = top_k > 0 ? std::min(top_k, V) : V;
  // Ties broken by token id so the draw is deterministic.
  std::partial_sort(order.begin(), order.begin() + k, order.end(),
                    [&](int a, int b) { return logits[a] != logits[b] ? logits[a] > logits[b] : a < b; });
  const double max_logit = logits[order[0]];
  std::vector<double> weights(k);
  double total = 0.0;
  for (int i = 0; i < k; ++i) total += weights[i] = std::exp((logits[order[i]] - max_logit) / temperature);
  int kept = k;
  if (top_p < 1.0) {
    double mass = 0.0;
    for (int i = 0; i < k; ++i) {
      mass += weights[i];
      if (mass >= top_p * total) {
        kept = i + 1;
        total = mass;
        break;
      }
    }
  }
  double target = uniform * total;
  for (int i = 0; i < kept; ++i) {
    target -= weights[i];
    if (target <= 0.0) return order[i];
  }
  return order[kept - 1];
}

std::vector<int> generate(GPT& model, const std::vector<int>& prompt, const SampleOptions& options, HostRng& rng) {
  GPT_CHECK(!prompt.empty(), "sampling needs at least one prompt token");
  std::vector<int> all = prompt;
  std::vector<int32_t> window;
  StepContext ctx;
  ctx.training = false;
  for (int i = 0; i < options.tokens; ++i) {
    const size_t T = std::min(all.size(), static_cast<size_t>(model.max_seq_len()));
    window.assign(all.end() - static_cast<std::ptrdiff_t>(T), all.end());
    model.forward(window, {}, 1, static_cast<int>(T), ctx);
    all.push_back(sample_token(model.logits_at(0, static_cast<int>(T) - 1), options.temperature, options.top_k,
                               rng.uniform(), options.top_p));
  }
  return std::vector<int>(all.begin() + static_cast<std::ptrdiff_t>(prompt.size()), all.end());
}

std::vector<int> generate_cached(GPT& model, const std::vector<int>& prompt, const SampleOptions& options,
                                 HostRng& rng, const std::function<void(int)>& on_token) {
  GPT_CHECK(!prompt.empty(), "sampling needs at least one prompt token");
  KvCacheDecoder decoder(model);
  std::vector<int> all = prompt;
  std::span<const float> logits;
  // The newest n tokens of all, from position 0.
  const auto refill = [&](size_t n) {
    decoder.reset();
    for (size_t i = all.size() - n; i < all.size(); ++i) logits = decoder.append(all[i]);
  };
  refill(std::min(all.size(), static_cast<size_t>(decoder.capacity())));
  for (int i = 0; i < options.tokens; ++i) {
    const int next = sample_token(logits, options.temperature, options.top_k, rng.uniform(), options.top_p);
    all.push_back(next);
    if (on_token) on_token(next);
    if (i + 1 == options.tokens) break;
    if (decoder.length() == decoder.capacity())
      refill(static_cast<size_t>(std::max(1, decoder.capacity() / 2)));
    else
      logits = decoder.append(next);
  }
  return std::vector<int>(all.begin() + static_cast<std::ptrdiff_t>(prompt.size()), all.end());
}

}  // namespace gpt
