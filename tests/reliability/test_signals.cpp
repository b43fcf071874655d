// SIGTERM/SIGINT on `gpt-train train`: the first finishes the step, writes a checkpoint and exits 0; a
// second one ends the process at once. Out of process, since the handler belongs to the train command.
#include "child_process.h"

#include "io/checkpoint.h"

#include <gtest/gtest.h>

namespace fs = std::filesystem;

namespace gpt::test {
namespace {

// Waits until pred() holds or the process exits; returns pred().
template <class P>
bool wait_for(TrainProcess& p, P pred) {
  for (int i = 0; i < 600000 && !pred(); ++i) {  // the ctest timeout bounds this; no wall time is asserted
    if (p.exited()) return pred();
    sleep_ms(0.1);
  }
  return pred();
}

TEST(StopSignal, SigtermFinishesTheStepWritesACheckpointAndExitsZero) {
  TempDir dir;
  const std::string config = write_tiny_run_config(dir, 1000000, 0);
  const std::string log = dir.file("log.txt");
  const std::string run = dir.file("run");
  TrainProcess p(config, {}, log);
  ASSERT_TRUE(wait_for(p, [&] { return losses_by_step(run + "/metrics.jsonl").size() >= 3; })) << read_text(log);
  p.signal(SIGTERM);
  const int status = p.wait();
  EXPECT_TRUE(exited_with(status, 0)) << read_text(log);
  const std::string output = read_text(log);
  EXPECT_NE(output.find("stop requested"), std::string::npos) << output;
  EXPECT_NE(output.find("train.resume=true"), std::string::npos) << output;

  const int64_t last = losses_by_step(run + "/metrics.jsonl").rbegin()->first;
  EXPECT_EQ(latest_checkpoint(run), checkpoint_dir(run, last));
  EXPECT_TRUE(verify_checkpoint(checkpoint_dir(run, last)).empty());

  TrainProcess resumed(config, {"train.resume=true", fmt::format("train.steps={}", last + 2)}, log);
  EXPECT_TRUE(exited_with(resumed.wait(), 0)) << read_text(log);
  EXPECT_EQ(losses_by_step(run + "/metrics.jsonl").size(), static_cast<size_t>(last + 2));
}

TEST(StopSignal, SecondSignalExitsAtOnce) {
  TempDir dir;
  // Steps long enough that the second signal lands while the first step is still running.
  const std::string config = write_tiny_run_config(dir, 1000000, 0, 128, 4);
  const std::string log = dir.file("log.txt");
  const std::string run = dir.file("run");
  TrainProcess p(config, {}, log);
  ASSERT_TRUE(wait_for(p, [&] { return !losses_by_step(run + "/metrics.jsonl").empty(); })) << read_text(log);
  p.signal(SIGINT);
  ASSERT_TRUE(wait_for(p, [&] { return read_text(log).find("stop requested") != std::string::npos; }));
  p.signal(SIGINT);
  const int status = p.wait();
  EXPECT_TRUE(killed_by(status, SIGINT)) << "status " << status << "\n" << read_text(log);
  for (const std::string& ckpt : list_checkpoints(run)) EXPECT_TRUE(verify_checkpoint(ckpt).empty()) << ckpt;
}

}  // namespace
}  // namespace gpt::test
