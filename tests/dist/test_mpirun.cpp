// gpt-train under mpirun, as users start it: 2 ranks train like 1 rank with the global batch, log with
// [rank N] prefixes and no colour codes, derive the accumulation from train.global_batch_tokens, and an error on one rank
// ends the whole job with its message instead of leaving the other rank waiting.
#include "config/config_loader.h"
#include "data/shard.h"
#include "command_util.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <fstream>


namespace gpt::test {
namespace {

// A command that hangs is ended by `timeout` (exit code 124).
CommandResult run(const std::string& command) { return run_command(command + " 2>&1"); }

// mpirun as root in containers, on fewer cores than ranks, without ptrace rights, and in sanitizer builds
// with Open MPI's own allocations left out of the leak report; each rank picks its own thread count
// (OMP_NUM_THREADS unset).
std::string mpirun(int ranks, const std::string& args) {
  return fmt::format(
      "env -u OMP_NUM_THREADS OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "
      "OMPI_MCA_btl_vader_single_copy_mechanism=none "
      "LSAN_OPTIONS=suppressions={}/tests/dist/mpi/lsan.supp:fast_unwind_on_malloc=0 "
      "timeout -k 10 120 {} -np {} --oversubscribe {} train {}",
      GPT_SOURCE_DIR, GPT_MPIEXEC, ranks, GPT_TRAIN_EXE, args);
}

std::string write_config(const TempDir& dir) {
  std::vector<uint16_t> tokens(20000);
  uint32_t x = 9;
  for (auto& t : tokens) t = static_cast<uint16_t>((x = x * 1664525u + 1013904223u) >> 28);
  write_shard(dir.file("train_000000.bin"), tokens);
  Config c;
  c.model = tiny_model(16, 2, 32, 2, 16);
  c.data.train = dir.file("train_*.bin");
  c.data.val = "";
  c.train.batch_size = 4;
  c.train.seq_len = 16;
  c.train.steps = 4;
  c.train.threads = 0;
  c.train.sample_tokens = 0;
  c.optim.warmup_steps = 2;
  c.dist.timeout_s = 60;
  const std::string path = dir.file("config.yaml");
  std::ofstream(path) << config_to_yaml(c);
  return path;
}

TEST(Mpirun, TwoRanksTrainLikeOneRankWithTheGlobalBatch) {
  TempDir dir;
  const std::string config = write_config(dir);
  const CommandResult one = run(fmt::format("{} train {} --set train.batch_size=8 --set log.run_dir={}", GPT_TRAIN_EXE,
                                            config, dir.file("one")));
  ASSERT_EQ(one.exit_code, 0) << one.output;
  EXPECT_EQ(one.output.find("data parallel"), std::string::npos) << "a plain start must not use MPI";
  const CommandResult two =
      run(mpirun(2, fmt::format("{} --set log.run_dir={} --set dist.log_all_ranks=true", config, dir.file("two"))));
  ASSERT_EQ(two.exit_code, 0) << two.output;
  EXPECT_NE(two.output.find("data parallel over mpi: 2 ranks on 1 node(s)"), std::string::npos) << two.output;
  EXPECT_NE(two.output.find("rank 1: local rank 1 of 2"), std::string::npos) << two.output;
  EXPECT_NE(two.output.find("[rank 1] "), std::string::npos) << two.output;
  EXPECT_NE(two.output.find("x 2 ranks x 4 sequences"), std::string::npos) << two.output;
  // Open MPI hands the ranks a pseudo-terminal even when its own output is a pipe, as here: no colour codes.
  EXPECT_EQ(two.output.find('\x1b'), std::string::npos) << two.output;

  const auto a = logged_losses(dir.file("one")), b = logged_losses(dir.file("two"));
  ASSERT_EQ(a.size(), 4u);
  ASSERT_EQ(b.size(), 4u);
  for (const auto& [step, loss] : a) EXPECT_NEAR(b.at(step), loss, 1e-5 * loss) << "step " << step;
}

TEST(Mpirun, GlobalBatchTokensSetsTheAccumulationSteps) {
  TempDir dir;
  const std::string config = write_config(dir);
  // 4 sequences x 16 tokens x 2 ranks x 3 micro-batches.
  const CommandResult ok = run(mpirun(2, fmt::format("{} --set log.run_dir={} --set train.steps=1 "
                                                     "--set train.global_batch_tokens=384",
                                                     config, dir.file("run"))));
  ASSERT_EQ(ok.exit_code, 0) << ok.output;
  EXPECT_NE(ok.output.find("3 micro-batches x 2 ranks x 4 sequences x 16 tokens = 384 tokens per step"),
            std::string::npos)
      << ok.output;
  const CommandResult bad = run(mpirun(2, fmt::format("{} --set log.run_dir={} --set train.global_batch_tokens=320",
                                                      config, dir.file("bad"))));
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.output.find("train.global_batch_tokens = 320 is not a multiple of train.batch_size x train.seq_len x "
                            "ranks = 4 x 16 x 2 = 128"),
            std::string::npos)
      << bad.output;
}

// Two shards of exactly one rank's micro-batch each, one holding a token outside the vocabulary: the rank
// that reads it fails in step 1 while the other waits in a collective. The whole job ends, with the
// message, long before the 120 s `timeout` (a hang would end with 124).
TEST(Mpirun, AnErrorOnOneRankEndsTheJobWithItsMessage) {
  TempDir dir;
  const std::string config = write_config(dir);
  std::vector<uint16_t> good(33, 1), bad(33, 2);
  bad[20] = 200;
  write_shard(dir.file("a_000000.bin"), good);
  write_shard(dir.file("a_000001.bin"), bad);
  const auto start = std::chrono::steady_clock::now();
  const CommandResult r = run(mpirun(2, fmt::format("{} --set log.run_dir={} --set train.batch_size=2 --set data.train={}",
                                                    config, dir.file("run"), dir.file("a_*.bin"))));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.exit_code, 124) << "the job hung until the test's timeout:\n" << r.output;
  EXPECT_NE(r.output.find("token 200 at index 20"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("aborting all 2 ranks"), std::string::npos) << r.output;
  std::printf("the job ended %.1f s after it started\n", seconds);
}

}  // namespace
}  // namespace gpt::test
