#include "bench/gemm_peak.h"

#include "bench/best_time.h"
#include "core/error.h"

#include <cblas.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <memory>
#include <optional>

namespace gpt::bench {
namespace {

struct FreeDeleter {
  void operator()(float* p) const { std::free(p); }
};
using Buffer = std::unique_ptr<float[], FreeDeleter>;

// 64-byte aligned, as the CPU backend's arenas are, filled with small values (no denormals, no NaN).
Buffer make_buffer(int64_t elements) {
  const size_t bytes = (static_cast<size_t>(std::max<int64_t>(elements, 1)) * sizeof(float) + 63) / 64 * 64;
  Buffer b(static_cast<float*>(std::aligned_alloc(64, bytes)));
  GPT_CHECK(b != nullptr, "gemm peak: could not allocate {} bytes", bytes);
  uint32_t state = 12345u;
  for (int64_t i = 0; i < elements; ++i) {
    state = state * 1664525u + 1013904223u;
    b[i] = (static_cast<float>(state >> 8) / 16777216.0f - 0.5f) * 0.1f;
  }
  return b;
}

void add_shape(std::vector<GemmShape>& shapes, GemmShape s) {
  for (GemmShape& existing : shapes) {
    if (existing.same_gemm(s)) {
      existing.name += " + " + s.name;
      existing.per_step += s.per_step;
      return;
    }
  }
  shapes.push_back(std::move(s));
}

}  // namespace

std::vector<GemmShape> model_gemm_shapes(const ModelConfig& model, int batch, int seq_len, int grad_accum,
                                         const LoraSpec& lora) {
  const int64_t BT = static_cast<int64_t>(batch) * seq_len, C = model.n_embd, L = model.n_layer;
  const int64_t Vp = model.padded_vocab_size(), K = grad_accum, r = lora.rank;
  struct Linear {
    const char* name;
    int64_t out_features, in_features, count;
    std::optional<LoraTarget> target;  // the adapter a LoRA run may put on it; none on the LM head
  };
  const Linear linears[] = {{"qkv", 3 * C, C, L, LoraTarget::Qkv},
                            {"attn proj", C, C, L, LoraTarget::AttnProj},
                            {"fc", 4 * C, C, L, LoraTarget::Fc},
                            {"fc proj", C, 4 * C, L, LoraTarget::FcProj},
                            {"lm head", Vp, C, 1, std::nullopt}};
  std::vector<GemmShape> shapes;
  for (const Linear& l : linears) {
    const std::string name = l.name;
    const int64_t calls = l.count * K, oc = l.out_features, ic = l.in_features;
    add_shape(shapes, {name + " forward", BT, oc, ic, false, true, 0.0f, calls});
    add_shape(shapes, {name + " backward dx", BT, ic, oc, false, false, 0.0f, calls});
    if (!lora.enabled()) add_shape(shapes, {name + " backward dW", oc, ic, BT, true, false, 1.0f, calls});
  }
  for (const Linear& l : linears) {
    if (!lora.enabled() || !l.target || !lora.has(*l.target)) continue;
    const std::string name = std::string(l.name) + " lora";
    const int64_t calls = l.count * K, oc = l.out_features, ic = l.in_features;
    add_shape(shapes, {name + " h", BT, r, ic, false, true, 0.0f, 2 * calls});
    add_shape(shapes, {name + " out", BT, oc, r, false, true, 1.0f, calls});
    add_shape(shapes, {name + " dB", oc, r, BT, true, false, 1.0f, calls});
    add_shape(shapes, {name + " dh", BT, r, oc, false, false, 0.0f, calls});
    add_shape(shapes, {name + " dA", r, ic, BT, true, false, 1.0f, calls});
    add_shape(shapes, {name + " dx", BT, ic, r, false, false, 1.0f, calls});
  }
  return shapes;
}

GemmPeak measure_gemm_peak(const std::vector<GemmShape>& shapes, int reps) {
  GPT_CHECK(reps >= 1, "gemm peak: reps must be >= 1, got {}", reps);
  int64_t max_a = 0, max_b = 0, max_c = 0;
  for (const GemmShape& s : shapes) {
    GPT_CHECK(s.m <= INT_MAX && s.n <= INT_MAX && s.k <= INT_MAX, "gemm peak: {} exceeds the BLAS int range", s.name);
    max_a = std::max(max_a, s.m * s.k);
    max_b = std::max(max_b, s.k * s.n);
    max_c = std::max(max_c, s.m * s.n);
  }
  Buffer a = make_buffer(max_a), b = make_buffer(max_b), c = make_buffer(max_c);
  GemmPeak peak;
  for (const GemmShape& s : shapes) {
    const int m = static_cast<int>(s.m), n = static_cast<int>(s.n), k = static_cast<int>(s.k);
    const int lda = s.trans_a ? m : k, ldb = s.trans_b ? k : n;
    auto call = [&] {
      cblas_sgemm(CblasRowMajor, s.trans_a ? CblasTrans : CblasNoTrans, s.trans_b ? CblasTrans : CblasNoTrans, m, n, k,
                  1.0f, a.get(), lda, b.get(), ldb, s.beta, c.get(), n);
    };
    const double best = best_seconds_of(reps, call);
    GemmRate rate{s, best, s.flops() / best / 1e9};
    peak.step_flops += s.flops() * static_cast<double>(s.per_step);
    peak.step_seconds_at_peak += best * static_cast<double>(s.per_step);
    peak.rates.push_back(std::move(rate));
  }
  return peak;
}

}  // namespace gpt::bench
