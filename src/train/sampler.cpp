#include "train/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace gpt {

int sample_token(const std::vector<float>& logits, double temperature, int top_k, double uniform) {
  GPT_CHECK(!logits.empty() && temperature > 0.0, "sampling needs logits and a positive temperature");
  const int V = static_cast<int>(logits.size());
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
  double target = uniform * total;
  for (int i = 0; i < k; ++i) {
    target -= weights[i];
    if (target <= 0.0) return order[i];
  }
  return order[k - 1];
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
                               rng.uniform()));
  }
  return std::vector<int>(all.begin() + static_cast<std::ptrdiff_t>(prompt.size()), all.end());
}

}  // namespace gpt
