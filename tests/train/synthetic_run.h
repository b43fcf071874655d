// The training runs the trainer tests share: a tiny model on a synthetic token sequence.
#pragma once

#include "config/config.h"
#include "config/config_loader.h"
#include "data/shard.h"
#include "test_util.h"
#include "train/trainer.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace gpt::test {

// A permutation of 13 tokens: repeated, every token determines the next.
inline std::vector<uint16_t> permutation_pattern() { return {3, 9, 0, 14, 7, 1, 12, 5, 10, 2, 15, 6, 11}; }

// A run on train_000000.bin holding `pattern` repeated to `length` tokens (and val_000000.bin holding its
// first quarter when with_val): 2 blocks of 32 channels, B8 T16, 10 steps, no eval, sample or checkpoint.
inline Config synthetic_run(const TempDir& dir, const std::vector<uint16_t>& pattern, size_t length,
                            bool with_val = true) {
  std::vector<uint16_t> tokens(length);
  for (size_t i = 0; i < length; ++i) tokens[i] = pattern[i % pattern.size()];
  write_shard(dir.file("train_000000.bin"), tokens);
  Config c;
  c.data.train = dir.file("train_*.bin");
  c.data.val = "";
  if (with_val) {
    write_shard(dir.file("val_000000.bin"), std::vector<uint16_t>(tokens.begin(), tokens.begin() + length / 4));
    c.data.val = dir.file("val_*.bin");
  }
  c.model = tiny_model(16, 2, 32, 2, 16);
  c.train.batch_size = 8;
  c.train.seq_len = 16;
  c.train.steps = 10;
  c.train.eval_every = 0;
  c.train.eval_batches = 2;
  c.train.sample_every = 0;
  c.train.sample_tokens = 0;
  c.optim.lr = 1e-2;
  c.optim.warmup_steps = 10;
  c.log.run_dir = dir.file("run");
  c.log.every = 1000;
  return c;
}

// The run `c` stopped after `stop_at` steps (its checkpoint in run_dir) and resumed there to c.train.steps:
// the resumed trainer's final weights, for a resume test to compare with the uninterrupted run's.
inline std::vector<float> weights_after_resume(const Config& c, int stop_at, const std::string& run_dir) {
  Config first = c;
  first.train.steps = stop_at;
  first.log.run_dir = run_dir;
  { Trainer(first, config_to_yaml(first)).run(); }
  Config second = first;
  second.train.steps = c.train.steps;
  second.train.resume = true;
  Trainer resumed(second, config_to_yaml(second));
  EXPECT_EQ(resumed.step(), stop_at);
  resumed.run();
  return resumed.model().parameters_to_host();
}

}  // namespace gpt::test
