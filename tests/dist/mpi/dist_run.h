// Tiny training runs for the data-parallel tests: a synthetic shard every rank reads, configs, and the
// comparisons (losses from metrics.jsonl, parameters) with their tolerances.
#pragma once

#include "config/config_loader.h"
#include "data/shard.h"
#include "mpi_test_util.h"
#include "train/trainer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

namespace gpt::test {

// The shard is written by rank 0; every rank then reads it.
inline Config dist_run(const SharedDir& dir, int batch_size, int accum, int steps = 5) {
  if (world().rank() == 0) {
    std::vector<uint16_t> tokens(30000);
    const std::vector<uint16_t> pattern{1, 4, 2, 8, 5, 7, 3, 3, 9, 0, 11, 6, 2, 13, 15, 1, 10};
    uint32_t x = 5;
    for (size_t i = 0; i < tokens.size(); ++i) {
      x = x * 1664525u + 1013904223u;
      // Mostly a learnable cycle, with some noise so the gradients stay large for all 5 steps.
      tokens[i] = (x >> 28) < 3 ? static_cast<uint16_t>(x >> 28) : pattern[i % pattern.size()];
    }
    write_shard(dir.file("train_000000.bin"), tokens);
  }
  world().barrier();
  Config c;
  c.model = tiny_model(16, 2, 32, 2, 16);
  c.data.train = dir.file("train_*.bin");
  c.data.val = "";
  c.train.batch_size = batch_size;
  c.train.seq_len = 16;
  c.train.grad_accum_steps = accum;
  c.train.steps = steps;
  c.train.threads = 1;
  c.train.eval_every = 0;
  c.train.sample_every = 0;
  c.train.sample_tokens = 0;
  c.optim.lr = 1e-2;
  c.optim.warmup_steps = 2;
  c.log.run_dir = dir.file("run");
  c.log.every = 1000;
  c.dist.timeout_s = 60;
  return c;
}

// max_i |a_i - b_i| / max_i |b_i|.
inline double relative_difference(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double diff = 0.0, scale = 0.0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(a[i]) - b[i]));
    scale = std::max(scale, std::abs(static_cast<double>(b[i])));
  }
  return diff / scale;
}

// Whether every rank holds exactly rank 0's values.
// Values of the model's FP8 weights (the linear weights of its FP8 blocks). Each rank casts them once per
// step, so a step's FP8 value count over W ranks exceeds one rank accumulating all W halves by W - 1 times
// this.
inline int64_t fp8_weight_values(GPT& model) {
  int64_t values = 0;
  for (const BlockParameters& w : model.compute_params().blocks)
    for (const Tensor* t : {&w.qkvw, &w.attprojw, &w.fcw, &w.fcprojw})
      if (t->scaling) values += t->numel();
  return values;
}

inline bool same_on_every_rank(std::vector<float> values) {
  std::vector<float> root = values;
  world().broadcast(Tensor(root.data(), {static_cast<int64_t>(root.size())}), 0);
  int32_t differs = root != values;
  world().all_reduce_sum(Tensor(&differs, {1}, DType::I32));
  return differs == 0;
}

}  // namespace gpt::test
