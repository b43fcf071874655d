// Out of process, as a real crash happens: `gpt-train train` is SIGKILLed and resumed. Resuming must give
// the same per-step losses (as text) and the same final weights (model.bin bytes) as a run that was never
// interrupted, with dropout on; and a kill at any moment, checkpoint writes included, must leave only
// complete checkpoints under their final names.
#include "child_process.h"

#include "io/checkpoint.h"

#include <gtest/gtest.h>

#include <random>
#include <set>

namespace fs = std::filesystem;

namespace gpt::test {
namespace {

std::string model_bytes(const std::string& run_dir, int64_t step) {
  return read_text((fs::path(checkpoint_dir(run_dir, step)) / "model.bin").string());
}

// The hidden .step_N.* directories a save or prune in progress has in checkpoints/.
std::set<std::string> hidden_entries(const std::string& run_dir) {
  std::set<std::string> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(fs::path(run_dir) / "checkpoints", ec))
    if (entry.path().filename().string().rfind(".step_", 0) == 0) out.insert(entry.path().filename().string());
  return out;
}

void expect_same_run(const std::string& reference, const std::string& run, int64_t steps) {
  const auto want = losses_by_step(reference + "/metrics.jsonl");
  const auto got = losses_by_step(run + "/metrics.jsonl");
  EXPECT_EQ(want.size(), static_cast<size_t>(steps));
  EXPECT_EQ(got, want);
  const std::string a = model_bytes(reference, steps), b = model_bytes(run, steps);
  EXPECT_FALSE(a.empty());
  EXPECT_TRUE(a == b) << "final model.bin of " << run << " differs from " << reference;
}

TEST(CrashResume, SigkillThenResumeIsBitwiseIdentical) {
  TempDir dir;
  constexpr int kN = 12;
  const std::string config = write_tiny_run_config(dir, 2 * kN, kN);
  const std::string log = dir.file("log.txt");
  const std::string straight = dir.file("straight");
  TrainProcess a(config, {"log.run_dir=" + straight}, log);
  ASSERT_TRUE(exited_with(a.wait(), 0)) << read_text(log);

  // Kill it once step N's checkpoint exists; a run that outran the poll and finished is retried.
  std::string killed;
  for (int attempt = 0; attempt < 5 && killed.empty(); ++attempt) {
    const std::string run = dir.file("killed_" + std::to_string(attempt));
    TrainProcess b(config, {"log.run_dir=" + run}, log);
    while (!b.exited() && !fs::exists(checkpoint_dir(run, kN))) sleep_ms(0.2);
    b.signal(SIGKILL);
    if (killed_by(b.wait(), SIGKILL) && !fs::exists(checkpoint_dir(run, 2 * kN))) killed = run;
  }
  ASSERT_FALSE(killed.empty()) << "the run always finished before it could be killed";
  EXPECT_LT(losses_by_step(killed + "/metrics.jsonl").rbegin()->first, 2 * kN);

  TrainProcess c(config, {"log.run_dir=" + killed, "train.resume=true"}, log);
  ASSERT_TRUE(exited_with(c.wait(), 0)) << read_text(log);
  EXPECT_NE(read_text(log).find(fmt::format("at step {}", kN)), std::string::npos);
  expect_same_run(straight, killed, 2 * kN);
}

// SIGKILL at random moments, 20 times, each followed by a resume, until the run completes; then another run
// if kills are left. Checkpoints every step (and pruning) make a good share of the kills land in a
// checkpoint write or a prune.
// A kill before the first checkpoint once left step 1 twice in metrics.jsonl (the fresh restart did not
// rewind it); the trainer now rewinds metrics on every resume, with or without a checkpoint.
TEST(CrashResume, TwentyRandomKillsNeverCostMoreThanTheLastCheckpoint) {
  TempDir dir;
  constexpr int kSteps = 16;
  const std::string config = write_tiny_run_config(dir, kSteps, 1);
  const std::string log = dir.file("log.txt");
  const std::string reference = dir.file("reference");
  const auto start = std::chrono::steady_clock::now();
  TrainProcess a(config, {"log.run_dir=" + reference, "checkpoint.keep_last=3"}, log);
  ASSERT_TRUE(exited_with(a.wait(), 0)) << read_text(log);
  const double run_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();

  std::mt19937 rng(20240520);
  std::uniform_real_distribution<double> delay(0.0, run_ms);
  int kills = 0, kills_mid_write = 0, runs = 0, cycles = 0;
  while (kills < 20 && cycles < 200) {
    const std::string run = dir.file("crash_" + std::to_string(runs++));
    const std::vector<std::string> sets = {"log.run_dir=" + run, "train.resume=true", "checkpoint.keep_last=3",
                                           "checkpoint.on_corrupt=fail"};
    for (;; ++cycles) {
      const auto leftovers_before = hidden_entries(run);
      TrainProcess p(config, sets, log);
      const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double, std::milli>(
                                                                kills < 20 ? delay(rng) : 1e9);
      while (!p.exited() && std::chrono::steady_clock::now() < until) sleep_ms(0.1);
      if (p.exited()) {
        ASSERT_TRUE(exited_with(p.wait(), 0)) << read_text(log);
        break;
      }
      p.signal(SIGKILL);
      const int status = p.wait();
      if (exited_with(status, 0)) break;  // it finished between the check and the kill
      ASSERT_TRUE(killed_by(status, SIGKILL)) << "status " << status << "\n" << read_text(log);
      ++kills;
      for (const std::string& name : hidden_entries(run)) kills_mid_write += !leftovers_before.count(name);
      for (const std::string& ckpt : list_checkpoints(run)) {
        const auto problems = verify_checkpoint(ckpt);
        EXPECT_TRUE(problems.empty()) << ckpt << ": " << problems.front();
      }
    }
    expect_same_run(reference, run, kSteps);
  }
  EXPECT_GE(kills, 20);
  std::cout << "[ crash    ] " << kills << " SIGKILLs over " << runs << " runs, " << kills_mid_write
            << " of them inside a checkpoint write or prune; every run resumed and matched bitwise\n";
  RecordProperty("kills", kills);
  RecordProperty("kills_mid_write", kills_mid_write);
}

}  // namespace
}  // namespace gpt::test
