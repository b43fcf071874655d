// A short training run for the equivalence tests that compare whole runs (recompute modes on the CPU in
// tests/memory, the CUDA backend against the CPU and against itself in tests/cuda/model): optimizer steps
// of several micro-batches with dropout, FP8 scales updated after every step as the trainer does, the
// activation arena poisoned before the first step so the bytes it writes can be measured.
#pragma once

#include "memory/arena_usage.h"
#include "memory/recompute.h"
#include "model/gpt.h"
#include "optim/adamw.h"

#include "cpu/gradcheck.h"
#include "test_util.h"

#include <cstdint>
#include <cstring>
#include <vector>

namespace gpt::test {

struct TrainShape {
  ModelConfig model;
  int batch = 2, seq_len = 8, micro_batches = 2, steps = 5;
};

struct TrainResult {
  std::vector<char> first_gradients;  // the gradient arena's bytes after the first step
  std::vector<double> losses;         // per step, summed over its micro-batches
  std::vector<float> final_parameters;
  uint64_t planned = 0, measured = 0;  // activation bytes: the plan's, and what the first step wrote
  FlopCounts first_flops;
};

inline std::vector<char> download_arena(Arena& arena, Backend& backend) {
  std::vector<char> host(arena.layout().total_bytes());
  backend.copy_to_host(host.data(), arena.base(), host.size());
  return host;
}

// Weights from seed 17, tokens and targets from seeds that depend on the step and micro-batch, dropout
// streams keyed by seed 9: every backend and policy sees the same run.
inline TrainResult train_steps(Backend& backend, const TrainShape& shape, const RecomputePolicy& recompute,
                               const PrecisionRecipe& recipe = {}) {
  const ModelConfig& m = shape.model;
  const int B = shape.batch, T = shape.seq_len, K = shape.micro_batches;
  GPT model(m, B, T, backend, DType::F32, recompute, recipe);
  model.init_weights(17);
  OptimConfig oc;
  AdamW optimizer(oc, model.parameter_layout(), backend);
  TrainResult r;
  r.planned = model.activation_plan().total_bytes();
  for (uint32_t step = 0; step < static_cast<uint32_t>(shape.steps); ++step) {
    if (step == 0) poison_arena(model.activation_arena(), backend);
    model.zero_grads();
    double loss = 0.0;
    for (uint32_t k = 0; k < static_cast<uint32_t>(K); ++k) {
      const std::vector<int32_t> tokens = random_tokens(B * T, m.vocab_size, 100 + step * 10 + k);
      const std::vector<int32_t> targets = random_tokens(B * T, m.vocab_size, 200 + step * 10 + k);
      const StepContext ctx{9, step, k, true};
      model.forward(tokens, targets, B, T, ctx, 1.0f / static_cast<float>(K * B * T));
      loss += model.loss_sum();
      model.backward(ctx);
    }
    if (Fp8State* fp8 = model.fp8()) {
      Fp8StepStats stats;
      fp8->update_scales(fp8->finish_step(stats));
    }
    model.gradient_norm_squared();
    if (step == 0) {
      r.first_gradients = download_arena(model.gradient_arena(), backend);
      r.measured = written_bytes(model.activation_arena(), backend);
      r.first_flops = model.flops();
    }
    r.losses.push_back(loss);
    optimizer.step(model.parameter_arena(), model.gradient_arena(), 1e-2, 1.0);
  }
  r.final_parameters = model.parameters_to_host();
  return r;
}

// r is the reference run bit for bit: the first step's gradients, every step's loss and the final weights.
inline void expect_bitwise_equal_runs(const TrainResult& r, const TrainResult& reference) {
  ASSERT_EQ(r.first_gradients.size(), reference.first_gradients.size());
  EXPECT_EQ(std::memcmp(r.first_gradients.data(), reference.first_gradients.data(), r.first_gradients.size()), 0);
  EXPECT_EQ(r.losses, reference.losses);
  EXPECT_EQ(r.final_parameters, reference.final_parameters);
}

}  // namespace gpt::test
