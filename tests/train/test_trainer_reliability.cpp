// The trainer's reliability paths in process: resuming past a damaged checkpoint (checkpoint.on_corrupt),
// refusing a changed model shape, rewinding metrics.jsonl, non-finite steps (train.on_nonfinite) and a
// stop request.
#include "train/trainer.h"

#include "config/config_loader.h"
#include "data/shard.h"
#include "io/checkpoint.h"
#include "io/durable_file.h"
#include "synthetic_run.h"
#include "train/resume.h"
#include "train/stop_request.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace fs = std::filesystem;

namespace gpt::test {
namespace {

// Dropout 0.1, B4, a checkpoint every step of 6, the default learning rate.
Config small_run(const TempDir& dir) {
  Config c = synthetic_run(dir, {1, 4, 2, 8, 5, 7, 3, 3, 9, 0, 11, 6, 2, 13, 15, 1, 10}, 20000, false);
  c.model = tiny_model(16, 2, 16, 2, 16);
  c.model.dropout = 0.1;
  c.train.batch_size = 4;
  c.train.steps = 6;
  c.train.eval_every = TrainConfig{}.eval_every;
  c.train.eval_batches = TrainConfig{}.eval_batches;
  c.optim.lr = OptimConfig{}.lr;
  c.optim.warmup_steps = 2;
  c.checkpoint.every = 1;
  return c;
}

TrainSummary train(const Config& c) {
  Trainer t(c, config_to_yaml(c));
  return t.run();
}

void flip_byte(const std::string& path, size_t offset) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(static_cast<std::streamoff>(offset));
  char c;
  f.get(c);
  f.seekp(static_cast<std::streamoff>(offset));
  f.put(static_cast<char>(c ^ 0x01));
}

TEST(TrainerReliability, DamagedLatestFallsBackToThePreviousAndStillMatches) {
  TempDir dir;
  Config c = small_run(dir);
  std::vector<float> reference_parameters;
  {
    Trainer reference(c, config_to_yaml(c));  // holds the run directory's lock until it goes
    reference.run();
    reference_parameters = reference.model().parameters_to_host();
  }
  // As if the run had crashed after writing step 4, and step 4's checkpoint had then been damaged.
  const std::string run = c.log.run_dir;
  fs::remove_all(checkpoint_dir(run, 6));
  fs::remove_all(checkpoint_dir(run, 5));
  flip_byte((fs::path(checkpoint_dir(run, 4)) / "optimizer.bin").string(), 5000);

  Config again = c;
  again.train.resume = true;
  again.checkpoint.on_corrupt = "fail";
  const std::string message = error_message([&] { Trainer t(again, config_to_yaml(again)); });
  EXPECT_NE(message.find("step_00000004' is damaged: optimizer.bin: CRC-32C"), std::string::npos) << message;

  again.checkpoint.on_corrupt = "previous";
  Trainer resumed(again, config_to_yaml(again));
  EXPECT_EQ(resumed.step(), 3);
  EXPECT_TRUE(fs::exists(checkpoint_dir(run, 4) + ".damaged"));
  resumed.run();
  EXPECT_EQ(resumed.model().parameters_to_host(), reference_parameters);
  EXPECT_TRUE(verify_checkpoint(checkpoint_dir(run, 4)).empty());
}

TEST(TrainerReliability, AllCheckpointsDamagedIsAnError) {
  TempDir dir;
  Config c = small_run(dir);
  c.train.steps = 2;
  train(c);
  for (const std::string& ckpt : list_checkpoints(c.log.run_dir)) fs::remove(fs::path(ckpt) / "config.yaml");
  c.train.resume = true;
  const std::string message = error_message([&] { Trainer t(c, config_to_yaml(c)); });
  EXPECT_NE(message.find("no intact checkpoint"), std::string::npos) << message;
}

TEST(TrainerReliability, ChangedModelShapeIsRefusedNamingTheKeys) {
  TempDir dir;
  Config c = small_run(dir);
  c.train.steps = 2;
  train(c);
  Config changed = c;
  changed.train.resume = true;
  changed.model.n_layer = 3;
  changed.model.n_embd = 32;
  const std::string message = error_message([&] { Trainer t(changed, config_to_yaml(changed)); });
  EXPECT_NE(message.find("model.n_layer is 2 in the checkpoint, 3 now"), std::string::npos) << message;
  EXPECT_NE(message.find("model.n_embd is 16 in the checkpoint, 32 now"), std::string::npos) << message;

  // Keys that leave the parameters' shapes alone may change.
  Config longer = c;
  longer.train.resume = true;
  longer.train.steps = 3;
  longer.model.dropout = 0.0;
  Trainer t(longer, config_to_yaml(longer));
  EXPECT_EQ(t.step(), 2);
  const auto changes = check_resume_config(config_to_yaml(c), config_to_yaml(longer), "x");
  EXPECT_NE(std::find(changes.begin(), changes.end(), "train.steps: 2 -> 3"), changes.end());
  EXPECT_NE(std::find(changes.begin(), changes.end(), "model.dropout: 0.1 -> 0.0"), changes.end());
}

TEST(TrainerReliability, MetricsAreRewoundToTheCheckpoint) {
  TempDir dir;
  const std::string path = dir.file("metrics.jsonl");
  const std::string text =
      "{\"step\":1,\"loss\":2.5}\n{\"step\":1,\"val_loss\":2.4}\n{\"step\":2,\"loss\":2.25}\n"
      "{\"step\":3,\"loss\":2.0}\n{\"step\":4,\"lo";
  write_file_durably(path, text);
  truncate_metrics_after(path, 2);
  EXPECT_EQ(read_file_bytes(path), "{\"step\":1,\"loss\":2.5}\n{\"step\":1,\"val_loss\":2.4}\n{\"step\":2,\"loss\":2.25}\n");
  truncate_metrics_after(dir.file("absent.jsonl"), 2);
  EXPECT_FALSE(fs::exists(dir.file("absent.jsonl")));
}

// Found by CrashResume.TwentyRandomKills: a run killed before its first checkpoint, resumed, wrote step 1
// a second time.
TEST(TrainerReliability, ResumeWithoutACheckpointRewindsMetricsToo) {
  TempDir dir;
  Config c = small_run(dir);
  c.train.resume = true;
  fs::create_directories(c.log.run_dir);
  write_file_durably(c.log.run_dir + "/metrics.jsonl", "{\"step\":1,\"loss\":2.5}\n{\"step\":2,\"lo");
  Trainer t(c, config_to_yaml(c));
  EXPECT_EQ(t.step(), 0);
  EXPECT_EQ(read_file_bytes(c.log.run_dir + "/metrics.jsonl"), "");
}

// A learning rate of 1e30 makes the weights ~1e30 after the first update, so the second step's forward
// overflows: a deterministic non-finite step 2.
Config exploding(const TempDir& dir) {
  Config c = small_run(dir);
  c.optim.lr = 1e30;
  c.optim.warmup_steps = 0;
  c.optim.grad_clip = 0.0;
  c.train.steps = 4;
  c.checkpoint.every = 0;
  return c;
}

TEST(TrainerNonFinite, StopKeepsTheLastGoodStateAndNamesTheTensor) {
  TempDir dir;
  Config c = exploding(dir);
  Trainer one(c, config_to_yaml(c));
  const std::vector<int32_t> in(64, 1), tg(64, 2);
  one.train_step(in, tg);
  const std::vector<float> after_one = one.model().parameters_to_host();
  const StepResult bad = one.train_step(in, tg);
  EXPECT_FALSE(bad.applied);
  EXPECT_EQ(one.step(), 1);
  EXPECT_NE(bad.nonfinite.find("first non-finite gradient: "), std::string::npos) << bad.nonfinite;
  EXPECT_EQ(one.model().parameters_to_host(), after_one);

  Config run = c;
  run.log.run_dir = dir.file("run_stop");
  std::vector<float> stopped_parameters;
  {
    Trainer t(run, config_to_yaml(run));
    const TrainSummary s = t.run();
    EXPECT_EQ(s.status, TrainStatus::NonFinite);
    EXPECT_EQ(s.steps_done, 1);
    EXPECT_NE(s.message.find("step 2: loss is"), std::string::npos) << s.message;
    EXPECT_EQ(s.last_checkpoint, checkpoint_dir(run.log.run_dir, 1));
    EXPECT_TRUE(verify_checkpoint(s.last_checkpoint).empty());
    stopped_parameters = t.model().parameters_to_host();
  }

  // The checkpoint holds the state before the bad step, loader position included: a resume replays it.
  Config resume = run;
  resume.train.resume = true;
  Trainer again(resume, config_to_yaml(resume));
  EXPECT_EQ(again.step(), 1);
  EXPECT_EQ(again.model().parameters_to_host(), stopped_parameters);
  EXPECT_EQ(again.run().status, TrainStatus::NonFinite);
}

TEST(TrainerNonFinite, SkipDropsTheUpdatesAndCountsThem) {
  TempDir dir;
  Config c = exploding(dir);
  c.train.on_nonfinite = "skip";
  c.train.steps = 2;
  std::vector<float> after_one;
  {
    Config one = c;
    one.train.steps = 1;
    one.log.run_dir = dir.file("one");
    Trainer t(one, config_to_yaml(one));
    t.run();
    after_one = t.model().parameters_to_host();
  }
  c.train.steps = 4;
  {
    Trainer t(c, config_to_yaml(c));
    const TrainSummary s = t.run();
    EXPECT_EQ(s.status, TrainStatus::Completed);
    EXPECT_EQ(s.steps_done, 4);
    EXPECT_EQ(s.skipped_steps, 3);
    EXPECT_EQ(t.optimizer().step_count(), 1);
    EXPECT_EQ(t.model().parameters_to_host(), after_one);
  }
  const std::string metrics = read_file_bytes(c.log.run_dir + "/metrics.jsonl");
  EXPECT_NE(metrics.find("\"skipped\":1"), std::string::npos) << metrics;

  // The skipped count travels with the checkpoint, so the optimizer's step count still checks out.
  Config more = c;
  more.train.resume = true;
  more.train.steps = 5;
  Trainer resumed(more, config_to_yaml(more));
  EXPECT_EQ(resumed.run().skipped_steps, 4);
}

TEST(TrainerStop, RequestStopsAfterTheCurrentStepWithACheckpoint) {
  TempDir dir;
  Config c = small_run(dir);
  c.checkpoint.every = 0;
  Trainer t(c, config_to_yaml(c));
  request_stop();
  const TrainSummary s = t.run();
  clear_stop_request();
  EXPECT_EQ(s.status, TrainStatus::Interrupted);
  EXPECT_EQ(s.steps_done, 0);
  ASSERT_TRUE(latest_checkpoint(c.log.run_dir).has_value());
  EXPECT_TRUE(verify_checkpoint(*latest_checkpoint(c.log.run_dir)).empty());
}

}  // namespace
}  // namespace gpt::test
