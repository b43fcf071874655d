#include "model/lora.h"

#include "core/error.h"

#include <algorithm>

namespace gpt {
std::vector<LoraBlock> lora_block_views(Arena& arena, const LoraSpec& spec, int n_layer) {
  std::vector<LoraBlock> blocks(static_cast<size_t>(n_layer));
  for (LoraTarget t : kAllLoraTargets) {
    if (!spec.has(t)) continue;
    const std::string base = lora_base_weight(t);
    const Tensor a = arena.tensor(base + ".lora_a"), b = arena.tensor(base + ".lora_b");
    for (int l = 0; l < n_layer; ++l) {
      blocks[static_cast<size_t>(l)].a[static_cast<size_t>(t)] = a[l];
      blocks[static_cast<size_t>(l)].b[static_cast<size_t>(t)] = b[l];
    }
  }
  return blocks;
}

LoraProducts::LoraProducts(Backend& backend, Arena& scratch, const LoraSpec& spec)
    : backend_(backend), scratch_(scratch), spec_(spec) {}

Tensor LoraProducts::rows_by_rank(const char* name, int64_t rows) {
  const Tensor full = scratch_.tensor(name);
  return Tensor(full.data, {rows, spec_.rank}, full.dtype, full.device);
}

Tensor LoraProducts::dropped_input(const Tensor& in, const DropoutSpec& dropout) {
  if (!dropout.active()) return in;
  const Tensor full = scratch_.tensor("lora_x");
  const Tensor x(full.data, {in.numel() / in.dim(-1), in.dim(-1)}, full.dtype, full.device);
  GPT_CHECK(x.bytes() <= full.bytes(), "LoRA input {} does not fit the {}-byte dropout scratch", in.shape_string(),
            full.bytes());
  // residual_backward's dx = mask * dout / (1 - p) is inverted dropout itself.
  backend_.residual_backward({x, in.reshaped({x.dim(0), x.dim(1)}), dropout});
  return x;
}

void LoraProducts::forward(const Tensor& out, const Tensor& in, const Tensor& a, const Tensor& b,
                           const DropoutSpec& dropout, double& flops) {
  const int64_t rows = in.numel() / in.dim(-1);
  const Tensor x = dropped_input(in, dropout);
  const Tensor h = rows_by_rank("lora_h", rows);
  backend_.matmul({h, x, a, Tensor(), false, true});
  backend_.matmul({out, h, b, Tensor(), false, true, spec_.scale(), 1.0f});
  flops += 2.0 * static_cast<double>(rows) * spec_.rank * static_cast<double>(a.dim(1) + b.dim(0));
}

void LoraProducts::backward(const Tensor& din, const Tensor& dout, const Tensor& in, const Tensor& a, const Tensor& b,
                            const Tensor& da, const Tensor& db, const DropoutSpec& dropout, double& flops) {
  const int64_t rows = in.numel() / in.dim(-1);
  const float s = spec_.scale();
  const Tensor x = dropped_input(in, dropout);
  const Tensor h = rows_by_rank("lora_h", rows), dh = rows_by_rank("lora_dh", rows);
  backend_.matmul({h, x, a, Tensor(), false, true});
  backend_.matmul({db, dout, h, Tensor(), true, false, s, 1.0f});
  backend_.matmul({dh, dout, b, Tensor(), false, false, s, 0.0f});
  backend_.matmul({da, dh, x, Tensor(), true, false, 1.0f, 1.0f});
  if (dropout.active()) {
    // x is consumed: it now holds dh A, which the mask of the forward scales into din.
    backend_.matmul({x, dh, a, Tensor()});
    const Tensor d = din.reshaped({x.dim(0), x.dim(1)});
    backend_.residual_forward({d, d, x, dropout});
  } else {
    backend_.matmul({din, dh, a, Tensor(), false, false, 1.0f, 1.0f});
  }
  const double r = spec_.rank, n = static_cast<double>(rows), i = static_cast<double>(a.dim(1)),
               o = static_cast<double>(b.dim(0));
  flops += 2.0 * n * r * (i + o + o + i + i);
}

void lora_merge_into(std::vector<float>& w, const std::vector<float>& a, const std::vector<float>& b, int64_t out,
                     int64_t in, int rank, double scale) {
  GPT_CHECK(w.size() == static_cast<size_t>(out * in) && a.size() == static_cast<size_t>(rank * in) &&
                b.size() == static_cast<size_t>(out * rank),
            "LoRA merge: W has {} elements, A {} and B {} for [{}, {}] at rank {}", w.size(), a.size(), b.size(), out,
            in, rank);
  for (int64_t o = 0; o < out; ++o) {
    for (int64_t i = 0; i < in; ++i) {
      double sum = 0.0;
      for (int k = 0; k < rank; ++k) sum += static_cast<double>(b[o * rank + k]) * a[k * in + i];
      w[o * in + i] = static_cast<float>(w[o * in + i] + scale * sum);
    }
  }
}

}  // namespace gpt
