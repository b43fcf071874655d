// One run per run directory: a fresh run into a directory holding a run is refused (or, with
// train.overwrite, the old run is moved aside first), and a second trainer on a locked directory is refused
// naming the process that holds it, a lock the kernel drops when that process dies.
#include "train/run_directory.h"

#include "config/config_loader.h"
#include "io/checkpoint.h"
#include "io/durable_file.h"
#include "reliability/child_process.h"
#include "synthetic_run.h"
#include "train/trainer.h"

#include <gtest/gtest.h>

#include <csignal>
#include <filesystem>

namespace fs = std::filesystem;

namespace gpt::test {
namespace {

Config short_run(const TempDir& dir) {
  Config c = synthetic_run(dir, permutation_pattern(), 4000, false);
  c.train.steps = 3;
  c.checkpoint.every = 2;
  return c;
}

void train(const Config& c) {
  Trainer t(c, config_to_yaml(c));
  t.run();
}

std::vector<fs::path> set_aside(const TempDir& dir) {
  std::vector<fs::path> out;
  for (const auto& entry : fs::directory_iterator(dir.path()))
    if (entry.path().filename().string().rfind("run.old-", 0) == 0) out.push_back(entry.path());
  return out;
}

TEST(RunDirectory, AFreshRunIntoARunIsRefusedNamingItAndTheWaysForward) {
  TempDir dir;
  Config c = short_run(dir);
  train(c);
  const std::string metrics_before = read_file_bytes(c.log.run_dir + "/metrics.jsonl");
  const std::string message = error_message([&] { train(c); });
  for (const char* part : {"holds a run trained to step 3 (last written 20", "2 checkpoint(s), the newest of step 3",
                           "metrics.jsonl", "--set train.resume=true", "--set log.run_dir=",
                           "--set train.overwrite=true"})
    EXPECT_NE(message.find(part), std::string::npos) << part << " not in: " << message;
  EXPECT_EQ(read_file_bytes(c.log.run_dir + "/metrics.jsonl"), metrics_before);
  EXPECT_EQ(list_checkpoints(c.log.run_dir).size(), 2u);
}

TEST(RunDirectory, MetricsAloneAreARunAndAConfigAloneIsNot) {
  TempDir dir;
  const std::string run = dir.file("run");
  fs::create_directories(run);
  write_file_durably(run + "/config.yaml", "model: {}\n");
  write_file_durably(run + "/metrics.jsonl", "");
  EXPECT_FALSE(find_existing_run(run).has_value());
  write_file_durably(run + "/metrics.jsonl", "{\"step\":1,\"loss\":2}\n{\"step\":7,\"loss\":1}\n{\"step\":7,\"val_loss\":1}\n");
  const auto found = find_existing_run(run);
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->last_step, 7);
  EXPECT_EQ(found->checkpoints, 0);
  EXPECT_FALSE(find_existing_run(dir.file("missing")).has_value());
}

TEST(RunDirectory, OverwriteMovesTheOldRunAsideAndStartsAfresh) {
  TempDir dir;
  Config c = short_run(dir);
  train(c);
  const std::string old_metrics = read_file_bytes(c.log.run_dir + "/metrics.jsonl");
  Config again = c;
  again.train.steps = 2;
  again.train.overwrite = true;
  // A run that fails its start checks sets nothing aside.
  Config broken = again;
  broken.data.train = dir.file("missing_*.bin");
  EXPECT_NE(error_message([&] { train(broken); }).find("data.train: no file matches"), std::string::npos);
  EXPECT_TRUE(set_aside(dir).empty());
  EXPECT_EQ(read_file_bytes(c.log.run_dir + "/metrics.jsonl"), old_metrics);
  train(again);
  const auto aside = set_aside(dir);
  ASSERT_EQ(aside.size(), 1u);
  EXPECT_EQ(read_file_bytes((aside[0] / "metrics.jsonl").string()), old_metrics);
  EXPECT_EQ(list_checkpoints(aside[0].string()).size(), 2u);
  EXPECT_FALSE(fs::exists(aside[0] / kRunLockFile));
  // The new run's records only, and only its checkpoint: a resume continues this run, not the old one.
  EXPECT_EQ(logged_losses(c.log.run_dir).size(), 2u);
  EXPECT_EQ(list_checkpoints(c.log.run_dir), std::vector<std::string>{checkpoint_dir(c.log.run_dir, 2)});

  again.train.resume = true;
  const std::string message = error_message([&] { train(again); });
  EXPECT_NE(message.find("train.resume and train.overwrite are both true"), std::string::npos) << message;
}

TEST(RunDirectory, ASecondLockIsRefusedNamingTheHolder) {
  TempDir dir;
  {
    RunDirectoryLock first(dir.file("run"));
    const std::string message = error_message([&] { RunDirectoryLock second(dir.file("run")); });
    EXPECT_NE(message.find("is in use by another trainer (pid " + std::to_string(::getpid()) + " on "),
              std::string::npos)
        << message;
  }
  RunDirectoryLock again(dir.file("run"));  // released with the first
}

// A trainer in another process holds the lock while it trains; killed, it holds nothing, and the run resumes.
TEST(RunDirectory, ATrainerInAnotherProcessHoldsTheLockUntilItDies) {
  TempDir dir;
  const std::string config = write_tiny_run_config(dir, 100000, 1);
  const std::string run = dir.file("run");
  TrainProcess child(config, {}, dir.file("child.log"));
  // Until its first checkpoint exists, the child is past the lock for sure.
  for (int i = 0; i < 3000 && !latest_checkpoint(run); ++i) sleep_ms(10);
  ASSERT_TRUE(latest_checkpoint(run).has_value()) << read_text(dir.file("child.log"));
  Config c = load_config(config, {"train.resume=true"});
  const std::string message = error_message([&] { Trainer t(c, config_to_yaml(c)); });
  EXPECT_NE(message.find("is in use by another trainer (pid " + std::to_string(child.pid()) + " on "),
            std::string::npos)
      << message;
  child.signal(SIGKILL);
  EXPECT_TRUE(killed_by(child.wait(), SIGKILL));
  Trainer resumed(c, config_to_yaml(c));
  EXPECT_GT(resumed.step(), 0);
}

}  // namespace
}  // namespace gpt::test
