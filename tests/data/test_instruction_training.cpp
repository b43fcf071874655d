// Instruction data through training: prompt masking changes which targets count, and by exactly the
// prompt's tokens; prepare --format jsonl then train, as a user runs them.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <regex>


#include "config/config_loader.h"
#include "data/loader.h"
#include "data/prepare.h"
#include "data/shard.h"
#include "command_util.h"
#include "test_util.h"
#include "train/trainer.h"

namespace gpt::test {
namespace {

using ::testing::HasSubstr;

struct PromptCompletion {
  std::string prompt, completion;
};

// Byte tokenizer: each example is its prompt's bytes, its completion's bytes and end-of-text ('\n'), so
// these four are 6 + 8 + 8 + 10 = 32 tokens, packed after one leading end-of-text: exactly the 2 rows of
// 16 targets one micro-batch of B2 T16 takes. 2 + 5 + 1 + 4 = 12 of them are prompt tokens.
const std::vector<PromptCompletion> kExamples = {{"ab", "cde"}, {"fghij", "kl"}, {"m", "nopqrs"}, {"tuvw", "xyz01"}};
constexpr int64_t kPromptTokens = 12;

void write_jsonl(const std::string& path, const std::vector<PromptCompletion>& examples) {
  std::ofstream out(path);
  for (const auto& e : examples)
    out << R"({"prompt": ")" << e.prompt << R"(", "completion": ")" << e.completion << "\"}\n";
}

// Cross-entropy of each counted target from the logits, in double: what "the mean over the counted tokens"
// means, computed apart from the fused kernel the step uses.
double mean_counted_loss(GPT& model, std::span<const int32_t> in, std::span<const int32_t> tg, int B, int T) {
  model.forward(in, tg, B, T, StepContext{1, 0, 0, false});
  double sum = 0.0;
  int64_t counted = 0;
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < T; ++t) {
      const int32_t target = tg[static_cast<size_t>(b * T + t)];
      if (target == -1) continue;
      const std::vector<float> logits = model.logits_at(b, t);
      double max = logits[0];
      for (float l : logits) max = std::max(max, static_cast<double>(l));
      double z = 0.0;
      for (float l : logits) z += std::exp(static_cast<double>(l) - max);
      sum += std::log(z) + max - static_cast<double>(logits[static_cast<size_t>(target)]);
      ++counted;
    }
  return sum / static_cast<double>(counted);
}

TEST(InstructionTraining, PromptMaskingLeavesOutExactlyThePromptTokens) {
  TempDir dir;
  write_jsonl(dir.file("train.jsonl"), kExamples);
  PrepareOptions prep;
  prep.input = dir.file("train.jsonl");
  prep.out_dir = dir.file("data");
  prep.format = "jsonl";
  prep.pack = true;
  prep.val_fraction = 0.0;
  const PrepareResult prepared = prepare_dataset(prep);
  ASSERT_EQ(prepared.train_tokens, 33u);
  EXPECT_EQ(prepared.counted_tokens, 32u - kPromptTokens);

  constexpr int B = 2, T = 16;
  Config c;
  c.data.train = dir.file("data/train_*.bin");
  c.data.val = "";
  c.model = tiny_model(256, 2, 16, 2, T);
  c.train.batch_size = B;
  c.train.seq_len = T;
  c.train.steps = 1;
  c.train.eval_every = 0;
  c.train.sample_every = 0;
  c.train.sample_tokens = 0;
  c.log.every = 1000;

  DataLoader loader({c.data.train, B, T, 256, false, 0, 0, 1});
  std::vector<int32_t> in(B * T), masked(B * T);
  loader.next_batch(in, masked);
  // The same rows with every target counted: the shard's tokens shifted by one.
  const std::vector<uint16_t> stream = read_shard(prepared.train_shards[0], 256);
  std::vector<int32_t> all(B * T);
  for (size_t i = 0; i < all.size(); ++i) {
    ASSERT_EQ(in[i], stream[i]);
    all[i] = stream[i + 1];
  }
  int64_t masked_targets = 0;
  for (size_t i = 0; i < all.size(); ++i) {
    if (masked[i] == -1) ++masked_targets;
    else EXPECT_EQ(masked[i], all[i]);
  }
  EXPECT_EQ(masked_targets, kPromptTokens);

  c.log.run_dir = dir.file("run_masked");
  Trainer with_mask(c, config_to_yaml(c));
  const double expected_masked = mean_counted_loss(with_mask.model(), in, masked, B, T);
  const StepResult m = with_mask.train_step(in, masked);
  c.log.run_dir = dir.file("run_all");
  Trainer without_mask(c, config_to_yaml(c));
  const double expected_all = mean_counted_loss(without_mask.model(), in, all, B, T);
  const StepResult a = without_mask.train_step(in, all);

  EXPECT_EQ(a.target_tokens, B * T);
  EXPECT_EQ(m.target_tokens, B * T - kPromptTokens);
  EXPECT_EQ(a.target_tokens - m.target_tokens, kPromptTokens);
  EXPECT_NEAR(m.loss, expected_masked, 1e-5 * expected_masked);
  EXPECT_NEAR(a.loss, expected_all, 1e-5 * expected_all);
}

TEST(InstructionTraining, PrepareJsonlThenTrainFromTheCommandLine) {
  TempDir dir;
  {
    std::ofstream out(dir.file("chat.jsonl"));
    for (int i = 0; i < 16; ++i) {
      if (i % 2 == 0)
        out << R"({"prompt": "Q: what is )" << i << R"( plus 1?\nA:", "completion": " )" << i + 1 << "\"}\n";
      else
        out << R"({"messages": [{"role": "user", "content": ")" << i << R"("}, {"role": "assistant", "content": "ok )"
            << i << "\"}]}\n";
    }
    out << "{\"prompt\": \"no completion\"}\n";
  }
  const std::string prepare = "prepare --format jsonl --input " + dir.file("chat.jsonl") + " --out " +
                              dir.file("data") + " --seq-len 32 --val-fraction 0.25";
  CommandResult r = run_cli(prepare);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.output, HasSubstr("chat.jsonl line 17: missing field \"completion\""));

  r = run_cli(prepare + " --skip-bad");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("line 17: missing field \"completion\"; left out"));
  EXPECT_THAT(r.output, HasSubstr("16 examples (1 bad line(s) and 0 too long left out)"));
  EXPECT_TRUE(std::filesystem::exists(dir.file("data/train_000000.bin.mask")));
  EXPECT_TRUE(std::filesystem::exists(dir.file("data/val_000000.bin.mask")));

  {
    std::ofstream(dir.file("config.yaml"))
        << "model:\n  vocab_size: 256\n  context_length: 32\n  n_layer: 2\n  n_head: 2\n  n_embd: 16\n"
           "data:\n  train: " << dir.file("data/train_*.bin") << "\n  val: " << dir.file("data/val_*.bin") << "\n"
           "train:\n  batch_size: 4\n  seq_len: 32\n  steps: 3\n  eval_every: 3\n  eval_batches: 1\n"
           "  sample_every: 0\n  sample_tokens: 0\n"
           "optim:\n  warmup_steps: 1\n"
           "log:\n  run_dir: " << dir.file("run") << "\n";
  }
  r = run_cli("train " + dir.file("config.yaml"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("val loss"));
  const auto losses = logged_losses(dir.file("run"));
  ASSERT_EQ(losses.size(), 3u);
  for (const auto& [step, loss] : losses) EXPECT_TRUE(std::isfinite(loss) && loss > 0.0) << "step " << step;
  // Each step's 4 rows of 32 targets count only their completions and end-of-text: " 1" to " 12" (3 or 4
  // tokens) or "ok 1" to "ok 11" (5 or 6) per row.
  std::ifstream metrics(dir.file("run/metrics.jsonl"));
  static const std::regex kTargets("\"target_tokens\":([0-9]+)");
  int steps = 0;
  for (std::string line; std::getline(metrics, line);) {
    std::smatch m;
    if (!std::regex_search(line, m, kTargets)) continue;
    ++steps;
    const int counted = std::stoi(m[1].str());
    EXPECT_GE(counted, 4 * 3) << line;
    EXPECT_LE(counted, 4 * 6) << line;
  }
  EXPECT_EQ(steps, 3);

  // The rows were padded to 32: another seq_len is refused, naming the fix.
  r = run_cli("train " + dir.file("config.yaml") + " --set train.seq_len=16 --set log.run_dir=" + dir.file("run16"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.output, HasSubstr("prepare the data again with --seq-len 16, or with --pack"));
}

}  // namespace
}  // namespace gpt::test
