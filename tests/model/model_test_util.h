// What the whole-model tests (tests/model, tests/lora) share: arenas flattened to the host, random
// perturbations of an arena, and the double-precision check of an arena's gradients against central
// finite differences on one masked batch with dropout on.
#pragma once

#include "model/gpt.h"

#include "cpu/gradcheck.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <vector>

namespace gpt::test {

inline int64_t count_targets(const std::vector<int32_t>& targets) {
  return std::count_if(targets.begin(), targets.end(), [](int32_t t) { return t != -1; });
}

// Every tensor of an F64 (or F32) arena, one after the other.
inline std::vector<double> flat_f64(Arena& arena) {
  std::vector<double> out;
  for (size_t i = 0; i < arena.layout().buffers().size(); ++i) {
    Tensor t = arena.tensor(i);
    const auto* p = static_cast<const double*>(t.data);
    out.insert(out.end(), p, p + t.numel());
  }
  return out;
}

inline std::vector<float> flat_f32(Arena& arena) {
  std::vector<float> out;
  for (size_t i = 0; i < arena.layout().buffers().size(); ++i) {
    Tensor t = arena.tensor(i);
    out.insert(out.end(), t.f32(), t.f32() + t.numel());
  }
  return out;
}

// Adds random values to every tensor of the arena (F64 or F32), seeded per tensor.
inline void perturb(Arena& arena, uint32_t seed, double scale) {
  for (size_t i = 0; i < arena.layout().buffers().size(); ++i) {
    Tensor t = arena.tensor(i);
    const std::vector<double> r = random_vector(static_cast<size_t>(t.numel()), seed + static_cast<uint32_t>(i), scale);
    for (int64_t j = 0; j < t.numel(); ++j) {
      if (t.dtype == DType::F64) static_cast<double*>(t.data)[j] += r[static_cast<size_t>(j)];
      else t.f32()[j] += static_cast<float>(r[static_cast<size_t>(j)]);
    }
  }
}

// The batch of the finite-difference checks: B = 2, T = 5, two targets masked (-1), so the check covers
// the loss normalisation by counted targets only; a training step context, so dropout masks are on and
// fixed.
struct GradientCheckBatch {
  int B = 2, T = 5;
  std::vector<int32_t> tokens, targets;
  StepContext ctx{42, 3, 1, true};

  explicit GradientCheckBatch(const ModelConfig& m)
      : tokens(random_tokens(static_cast<size_t>(B * T), m.vocab_size, 5)),
        targets(random_tokens(static_cast<size_t>(B * T), m.vocab_size, 6)) {
    targets[1] = targets[7] = -1;
  }
  // The step loss as the trainer defines it: the summed token losses over the counted targets.
  double loss(GPT& model) const {
    model.forward(tokens, targets, B, T, ctx);
    return model.loss_sum() / static_cast<double>(count_targets(targets));
  }
  // The gradient arena after one backward of the step loss, flattened.
  std::vector<double> gradients(GPT& model) const {
    model.zero_grads();
    model.forward(tokens, targets, B, T, ctx, static_cast<float>(1.0 / static_cast<double>(count_targets(targets))));
    model.backward(ctx);
    return flat_f64(model.gradient_arena());
  }
};

// Finite differences (step 1e-5) of the batch's loss at every (numel / samples)-th element of each of the
// model's parameter arena tensors (all of them would take minutes), less those `skip(tensor, element)`
// passes over; beside each, the element of `analytic` (the flattened gradient arena) it checks.
struct FiniteDifferences {
  std::vector<double> numeric, analytic;
};
inline FiniteDifferences finite_differences(GPT& model, const GradientCheckBatch& batch,
                                            const std::vector<double>& analytic, int64_t samples,
                                            const std::function<bool(size_t, int64_t)>& skip = {}) {
  FiniteDifferences out;
  Arena& params = model.parameter_arena();
  size_t offset = 0;
  for (size_t i = 0; i < params.layout().buffers().size(); ++i) {
    Tensor t = params.tensor(i);
    auto* p = static_cast<double*>(t.data);
    const int64_t stride = std::max<int64_t>(1, t.numel() / samples);
    for (int64_t j = 0; j < t.numel(); j += stride) {
      if (skip && skip(i, j)) continue;
      const double h = 1e-5, saved = p[j];
      p[j] = saved + h;
      const double up = batch.loss(model);
      p[j] = saved - h;
      const double down = batch.loss(model);
      p[j] = saved;
      out.numeric.push_back((up - down) / (2 * h));
      out.analytic.push_back(analytic[offset + static_cast<size_t>(j)]);
    }
    offset += static_cast<size_t>(t.numel());
  }
  return out;
}

}  // namespace gpt::test
