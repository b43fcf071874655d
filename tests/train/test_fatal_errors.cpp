// A fatal error in the middle of a run (a bad shard, a full disk) costs no trained step: the trainer writes
// a checkpoint of the last good state before it stops, and says where; what can be checked at start is.
#include "command_util.h"
#include "config/config_loader.h"
#include "data/shard.h"
#include "io/checkpoint.h"
#include "reliability/child_process.h"
#include "synthetic_run.h"
#include "train/trainer.h"

#include <gtest/gtest.h>

#include <filesystem>

namespace fs = std::filesystem;

namespace gpt::test {
namespace {

std::vector<uint16_t> pattern_tokens(size_t n) {
  std::vector<uint16_t> tokens(n);
  for (size_t i = 0; i < n; ++i) tokens[i] = permutation_pattern()[i % permutation_pattern().size()];
  return tokens;
}

TEST(TrainerFatal, ABadTokenInAnyShardIsFoundAtStart) {
  TempDir dir;
  Config c = synthetic_run(dir, permutation_pattern(), 4000, false);
  std::vector<uint16_t> bad = pattern_tokens(4000);
  bad[3001] = 200;  // model.vocab_size is 16
  write_shard(dir.file("train_000001.bin"), bad);
  const std::string message = error_message([&] { Trainer t(c, config_to_yaml(c)); });
  EXPECT_NE(message.find("train_000001.bin: token 200 at index 3001"), std::string::npos) << message;
}

TEST(TrainerFatal, AShardGoingBadMidRunCheckpointsTheLastGoodState) {
  TempDir dir;
  Config c = synthetic_run(dir, permutation_pattern(), 4000, true);
  c.train.steps = 8;
  c.train.eval_every = 3;
  c.checkpoint.every = 2;
  std::vector<float> at_step_3;
  {
    Trainer t(c, config_to_yaml(c));
    // Checked at start, then damaged before the first evaluation (step 3) loads it.
    std::vector<uint16_t> bad = pattern_tokens(1000);
    bad[10] = 300;
    write_shard(dir.file("val_000000.bin"), bad);
    const std::string message = error_message([&] { t.run(); });
    EXPECT_NE(message.find("token 300 at index 10"), std::string::npos) << message;
    EXPECT_NE(message.find("the last good state, step 3, is in '" + checkpoint_dir(c.log.run_dir, 3) + "'"),
              std::string::npos)
        << message;
    EXPECT_NE(message.find("--set train.resume=true"), std::string::npos) << message;
    at_step_3 = t.model().parameters_to_host();
  }
  EXPECT_TRUE(verify_checkpoint(checkpoint_dir(c.log.run_dir, 3)).empty());
  write_shard(dir.file("val_000000.bin"), pattern_tokens(1000));
  Config resume = c;
  resume.train.resume = true;
  Trainer again(resume, config_to_yaml(resume));
  EXPECT_EQ(again.step(), 3);
  EXPECT_EQ(again.model().parameters_to_host(), at_step_3);
}

// A disk that fills up while metrics.jsonl grows: a file size limit (ulimit -f) makes every write past it
// fail with EFBIG, while the small checkpoint files still fit.
TEST(TrainerFatal, AFailedMetricsWriteNamesTheReasonAndCheckpoints) {
  TempDir dir;
  const std::string config = write_tiny_run_config(dir, 1000, 50, 8, 2);
  const std::string command = "sh -c 'ulimit -f 72; trap \"\" XFSZ; exec " + std::string(GPT_TRAIN_EXE) + " train " +
                              config + "' 2>&1";
  const auto [exit_code, output] = run_command(command);
  EXPECT_EQ(exit_code, 1) << output;
  EXPECT_NE(output.find("writing to metrics file '" + dir.file("run") + "/metrics.jsonl' failed: File too large"),
            std::string::npos)
      << output;
  const auto latest = latest_checkpoint(dir.file("run"));
  ASSERT_TRUE(latest.has_value()) << output;
  EXPECT_TRUE(verify_checkpoint(*latest).empty());
  const int64_t step = std::stoll(fs::path(*latest).filename().string().substr(5));
  EXPECT_GT(step % 50, 0) << "the last checkpoint is a periodic one, not the last good state";
  EXPECT_NE(output.find(fmt::format("the last good state, step {}, is in '{}'", step, *latest)), std::string::npos)
      << output;
}

}  // namespace
}  // namespace gpt::test
