// gpt-train-emu under mpirun with train.backend cuda, the job a user starts on GPUs, with its NCCL
// emulated over MPI: the ranks report the NCCL communicator, and a fault on one rank ends the whole job
// within seconds instead of leaving the other waiting in a collective: an exception (a bad token, found
// by rank 0 while rank 1 waits in the weights' broadcast), a SIGKILL in the middle of training, and a
// SIGSTOP, which only the watchdog's timeout can detect.
#include "config/config_loader.h"
#include "data/shard.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <sys/wait.h>

namespace gpt::test {
namespace {

struct CommandResult {
  int exit_code = -1;
  std::string output;
};

CommandResult run(const std::string& command) {
  CommandResult result;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[4096];
  while (size_t n = std::fread(buffer, 1, sizeof(buffer), pipe)) result.output.append(buffer, n);
  const int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

// As tests/dist/test_mpirun.cpp starts mpirun; `program` runs as each rank (a shell line may wrap it).
std::string mpirun(const std::string& program) {
  return fmt::format(
      "env OMP_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "
      "OMPI_MCA_btl_vader_single_copy_mechanism=none "
      "LSAN_OPTIONS=suppressions={}/tests/dist/mpi/lsan.supp:fast_unwind_on_malloc=0 "
      "timeout -k 10 120 {} -np 2 --oversubscribe {}",
      GPT_SOURCE_DIR, GPT_MPIEXEC, program);
}

std::string write_config(const TempDir& dir, int steps) {
  std::vector<uint16_t> tokens(20000);
  uint32_t x = 9;
  for (auto& t : tokens) t = static_cast<uint16_t>((x = x * 1664525u + 1013904223u) >> 28);
  write_shard(dir.file("train_000000.bin"), tokens);
  Config c;
  c.model = tiny_model(16, 2, 32, 2, 16);
  c.data.train = dir.file("train_*.bin");
  c.data.val = "";
  c.train.backend = "cuda";
  c.train.batch_size = 2;
  c.train.seq_len = 16;
  c.train.steps = steps;
  c.train.threads = 1;
  c.train.sample_tokens = 0;
  c.log.every = 1;
  c.log.run_dir = dir.file("run");
  c.optim.warmup_steps = 2;
  c.dist.timeout_s = 60;
  const std::string path = dir.file("config.yaml");
  std::ofstream(path) << config_to_yaml(c);
  return path;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

TEST(NcclMpirun, AnErrorOnOneRankEndsTheJobWithItsMessage) {
  TempDir dir;
  const std::string config = write_config(dir, 4);
  // Two shards of exactly one rank's micro-batch each; the second holds a token outside the vocabulary.
  std::vector<uint16_t> good(33, 1), bad(33, 2);
  bad[20] = 200;
  write_shard(dir.file("a_000000.bin"), good);
  write_shard(dir.file("a_000001.bin"), bad);
  const auto start = std::chrono::steady_clock::now();
  const CommandResult r = run(mpirun(fmt::format("{} train {} --set data.train={} --set dist.log_all_ranks=true",
                                                 GPT_TRAIN_EMU_EXE, config, dir.file("a_*.bin"))));
  const double seconds = seconds_since(start);
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.exit_code, 124) << "the job hung until the test's timeout:\n" << r.output;
  EXPECT_NE(r.output.find("data parallel over nccl: 2 ranks"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("token 200 at index 20"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("aborting all 2 ranks"), std::string::npos) << r.output;
  std::printf("the job ended %.1f s after it started (start-up on the emulator included)\n", seconds);
}

struct Fault {
  CommandResult result;
  double after_signal_s = -1.0;  // from the signal to the end of the job; < 0 if it was never sent
};

// Rank 1 sends itself `signal` once training has logged a step, while rank 0 is in the middle of its
// collectives. The wrapper execs gpt-train-emu in its own process ($$), which the background watcher
// signals.
Fault signal_rank_1(const std::string& signal, const std::string& sets) {
  TempDir dir;
  const std::string config = write_config(dir, 100000);
  const std::string metrics = dir.file("run/metrics.jsonl"), sent_at = dir.file("sent_at");
  const std::string rank = fmt::format(
      "sh -c 'if [ \"$OMPI_COMM_WORLD_RANK\" = 1 ]; then (while ! grep -q loss {} 2>/dev/null; do sleep 0.1; "
      "done; date +%s.%N > {}; kill -{} $$) & fi; exec {} train {} {}'",
      metrics, sent_at, signal, GPT_TRAIN_EMU_EXE, config, sets);
  Fault fault;
  fault.result = run(mpirun(rank));
  const double ended = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  double sent = 0.0;
  if (std::ifstream in(sent_at); in >> sent) fault.after_signal_s = ended - sent;
  return fault;
}

// A rank killed by SIGKILL: the job ends within 10 s of the kill, the launcher naming the rank.
TEST(NcclMpirun, ARankKilledBySigkillEndsTheJobWithinTenSeconds) {
  const Fault f = signal_rank_1("KILL", "");
  EXPECT_NE(f.result.exit_code, 0) << f.result.output;
  EXPECT_NE(f.result.exit_code, 124) << "the job hung until the test's timeout:\n" << f.result.output;
  ASSERT_GE(f.after_signal_s, 0.0) << "rank 1 was never killed:\n" << f.result.output;
  EXPECT_LT(f.after_signal_s, 10.0) << f.result.output;
  EXPECT_NE(f.result.output.find("process rank 1"), std::string::npos) << f.result.output;
  EXPECT_NE(f.result.output.find("signal 9"), std::string::npos) << f.result.output;
  std::printf("the job ended %.1f s after rank 1 was killed\n", f.after_signal_s);
}

// A rank stopped by SIGSTOP never fails by itself: rank 0's watchdog aborts the collective the stopped
// rank does not join dist.timeout_s (3 s here) after rank 0 issued it, naming rank and operation and,
// from the node's progress board, whether the stopped rank has issued it; and rank 0's error then ends
// the job (MPI_Abort also ends the stopped rank) within a few seconds more. (That
// collective may have been issued just before the stop, so the job may end a little under 3 s after it.)
TEST(NcclMpirun, ARankStoppedBySigstopEndsTheJobAfterTheTimeout) {
  const Fault f = signal_rank_1("STOP", "--set dist.timeout_s=3");
  EXPECT_NE(f.result.exit_code, 0) << f.result.output;
  EXPECT_NE(f.result.exit_code, 124) << "the job hung until the test's timeout:\n" << f.result.output;
  ASSERT_GE(f.after_signal_s, 0.0) << "rank 1 was never stopped:\n" << f.result.output;
  EXPECT_LT(f.after_signal_s, 3.0 + 10.0) << f.result.output;
  EXPECT_NE(f.result.output.find("rank 0 of 2: NCCL "), std::string::npos) << f.result.output;
  EXPECT_NE(f.result.output.find("has not completed within 3 s (dist.timeout_s)"), std::string::npos) << f.result.output;
  // Rank 1 stops while computing (then it has not issued the collective rank 0 waits in) or, less
  // likely, between issuing it and its stream's joining it: the message says which.
  const bool named = f.result.output.find("(dist.timeout_s): rank 1 has not reached it") != std::string::npos;
  const bool inside = f.result.output.find("(dist.timeout_s): every rank has issued it") != std::string::npos;
  EXPECT_TRUE(named || inside) << f.result.output;
  EXPECT_NE(f.result.output.find("aborting all 2 ranks"), std::string::npos) << f.result.output;
  std::printf("the job ended %.1f s after rank 1 was stopped (dist.timeout_s 3); rank 1 had %s\n", f.after_signal_s,
              named ? "not issued the collective" : "issued the collective");
}

}  // namespace
}  // namespace gpt::test
