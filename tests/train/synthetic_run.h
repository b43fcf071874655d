// The training runs the trainer tests share: a tiny model on a synthetic token sequence.
#pragma once

#include "config/config.h"
#include "config/config_loader.h"
#include "data/shard.h"
#include "optim/adamw.h"
#include "test_util.h"
#include "train/trainer.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace gpt::test {

// A permutation of 13 tokens: repeated, every token determines the next.
inline std::vector<uint16_t> permutation_pattern() { return {3, 9, 0, 14, 7, 1, 12, 5, 10, 2, 15, 6, 11}; }

// A cycle of 17 tokens in which 1, 2 and 3 are followed by two different tokens each: repeated, most tokens
// determine the next and a few do not, so the loss stays above zero and the gradients large.
inline std::vector<uint16_t> cycle_pattern() { return {1, 4, 2, 8, 5, 7, 3, 3, 9, 0, 11, 6, 2, 13, 15, 1, 10}; }

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


// What a finished run leaves for an equivalence test: the losses of metrics.jsonl, the final weights, and
// where its optimizer kept its state.
struct FinishedRun {
  std::map<int64_t, double> losses;
  std::vector<float> weights;
  bool offloaded = false;  // memory.offload: optimizer took effect
  bool pinned = false;     // and its host state is the device's pinned memory
  bool masters_on_host = false;  // and the FP32 masters live in host memory only (narrow recipes, one rank)
};

inline FinishedRun run_to_end(const Config& c) {
  Trainer t(c, config_to_yaml(c));
  t.run();
  return {logged_losses(c.log.run_dir), t.model().parameters_to_host(), t.optimizer().offloaded(),
          t.optimizer().host_memory_pinned(), t.model().masters_on_host()};
}

// The optimizer-offload tests' run on `backend` (cpu or cuda): cycle_pattern() without validation, `steps`
// steps of B = batch_size sequences accumulated grad_accum_steps times, AdamW's state on the host
// (memory.offload: optimizer). With dropout, and clipping at 0.5 (active), as the offloaded update must
// see the norm and the gradients the device's would.
inline Config offload_run(const TempDir& dir, const std::string& backend, int steps, int batch_size,
                          int grad_accum_steps) {
  Config c = synthetic_run(dir, cycle_pattern(), 20000, false);
  c.train.backend = backend;
  c.train.steps = steps;
  c.train.batch_size = batch_size;
  c.train.grad_accum_steps = grad_accum_steps;
  c.model.dropout = 0.1;
  c.optim.grad_clip = 0.5;
  c.memory.offload = "optimizer";
  return c;
}

// `c` run to the end with AdamW on the device and offloaded (in dir's `tag`_device and `tag`_offload):
// the same losses and weights bit for bit, as the host's AdamW (the CPU backend's) rounds every operation
// as the device's does (src/cpu/adamw.cpp, cuda/kernels/adamw.cu). Returns the offloaded run.
inline FinishedRun expect_offload_equals_device_bitwise(const TempDir& dir, Config c, const std::string& tag) {
  c.memory.offload = "none";
  c.log.run_dir = dir.file(tag + "_device");
  const FinishedRun device = run_to_end(c);
  c.memory.offload = "optimizer";
  c.log.run_dir = dir.file(tag + "_offload");
  const FinishedRun offloaded = run_to_end(c);
  EXPECT_FALSE(device.offloaded);
  EXPECT_TRUE(offloaded.offloaded);
  EXPECT_EQ(device.losses.size(), static_cast<size_t>(c.train.steps));
  EXPECT_EQ(offloaded.losses, device.losses);
  EXPECT_EQ(offloaded.weights, device.weights);
  return offloaded;
}

}  // namespace gpt::test
