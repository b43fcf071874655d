// Runs the gpt-train executable as a user would and checks exit codes, output and the run directory.
#include "data/shard.h"
#include "io/llmc_model_file.h"
#include "command_util.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <fstream>
#include <regex>
#include <sstream>

#include <pty.h>
#include <sys/wait.h>
#include <unistd.h>

namespace gpt::test {
namespace {

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_text(const std::filesystem::path& path, const std::string& text) { std::ofstream(path) << text; }

std::string tiny_config(const TempDir& dir) {
  return "model:\n  vocab_size: 256\n  context_length: 32\n  n_layer: 2\n  n_head: 2\n  n_embd: 16\n"
         "data:\n  train: " + dir.file("data/train_*.bin") + "\n  val: " + dir.file("data/val_*.bin") + "\n"
         "train:\n  batch_size: 4\n  seq_len: 32\n  steps: 3\n  eval_every: 2\n  eval_batches: 2\n"
         "  sample_every: 3\n  sample_tokens: 20\n  sample_prompt: \"the \"\n"
         "optim:\n  warmup_steps: 2\n"
         "log:\n  run_dir: " + dir.file("run") + "\n";
}

TEST(Cli, HelpListsCommandsAndOptions) {
  CommandResult r = run_cli("--help");
  EXPECT_EQ(r.exit_code, 0);
  for (const char* command : {"train", "prepare", "sample", "config", "info"}) EXPECT_NE(r.output.find(command), std::string::npos);
  r = run_cli("train --help");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.output.find("--set"), std::string::npos);
  r = run_cli("frobnicate");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("unknown command 'frobnicate'"), std::string::npos);
}

TEST(Cli, PrepareTrainSampleWritesTheRunDirectory) {
  TempDir dir;
  std::string text;
  for (int i = 0; i < 400; ++i) text += "the quick brown fox jumps over the lazy dog. ";
  write_text(dir.path() / "input.txt", text);
  CommandResult r = run_cli("prepare --input " + dir.file("input.txt") + " --out " + dir.file("data"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  write_text(dir.path() / "tiny.yaml", tiny_config(dir));

  r = run_cli("train " + dir.file("tiny.yaml"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("step     3/3"), std::string::npos) << r.output;

  const auto run = dir.path() / "run";
  EXPECT_TRUE(std::filesystem::exists(run / "config.yaml"));
  const std::string metrics = read_text(run / "metrics.jsonl");
  for (const char* step : {"{\"step\":1,\"loss\":", "{\"step\":2,\"loss\":", "{\"step\":3,\"loss\":"})
    EXPECT_NE(metrics.find(step), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("\"val_loss\":"), std::string::npos);
  EXPECT_NE(metrics.find("\"sample\":\"the "), std::string::npos);
  const auto checkpoint = run / "checkpoints" / "step_00000003";
  for (const char* file : {"model.bin", "optimizer.bin", "state.yaml", "config.yaml"})
    EXPECT_TRUE(std::filesystem::exists(checkpoint / file)) << file;
  EXPECT_NE(read_text(checkpoint / "state.yaml").find("step: 3"), std::string::npos);

  // Resume to step 5: the metrics continue at step 4.
  r = run_cli("train " + dir.file("tiny.yaml") + " --set train.steps=5 --set train.resume=true");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("resumed from"), std::string::npos);
  EXPECT_NE(read_text(run / "metrics.jsonl").find("{\"step\":4,"), std::string::npos);
  EXPECT_TRUE(std::filesystem::exists(run / "checkpoints" / "step_00000005" / "model.bin"));

  r = run_cli("sample " + run.string() + " --tokens 10 --prompt fox");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.rfind("fox", 0), 0u) << r.output;

  // The same prompt from a file, with the spelling of the length: the same text (same seed; stdout
  // alone, stderr has the timing).
  write_bytes(dir.file("prompt.txt"), "fox", 3);
  const CommandResult from_flag = run_cli("sample " + run.string() + " --tokens 10 --prompt fox", "/dev/null");
  const CommandResult from_file =
      run_cli("sample " + run.string() + " --max-tokens 10 --prompt-file " + dir.file("prompt.txt"), "/dev/null");
  ASSERT_EQ(from_file.exit_code, 0) << from_file.output;
  EXPECT_EQ(from_file.output, from_flag.output);
  EXPECT_NE(run_cli("sample " + run.string() + " --prompt a --prompt-file " + dir.file("prompt.txt")).output.find(
                "not both"),
            std::string::npos);

  // Another recipe decodes the same weights in its formats, with the cache and without it alike (greedy);
  // a name that is no recipe is refused, naming the choices.
  for (const char* recipe : {"bf16", "fp8"}) {
    const std::string greedy = "sample " + run.string() + " --tokens 10 --prompt fox --top-k 1 --recipe " + recipe;
    const CommandResult cached = run_cli(greedy, dir.file("cached.err"));
    ASSERT_EQ(cached.exit_code, 0) << cached.output << read_text(dir.path() / "cached.err");
    EXPECT_NE(read_text(dir.path() / "cached.err").find(std::string("KV cache, ") + recipe), std::string::npos);
    EXPECT_EQ(run_cli(greedy + " --no-cache", "/dev/null").output, cached.output) << recipe;
  }
  EXPECT_NE(run_cli("sample " + run.string() + " --recipe fp64").output.find("give fp32, bf16, fp16, fp8 or run"),
            std::string::npos);
}

// bench times its ops over exactly the timed steps: with --warmup 0 the first step is one of them, so one
// step still reports where its time went (it once reported 0 ms for every op family), with the ops' traffic
// and the bandwidth it is set against.
TEST(Cli, BenchWithoutWarmUpStillTimesTheOps) {
  TempDir dir;
  write_text(dir.path() / "tiny.yaml", tiny_config(dir));  // no shards there: bench draws random tokens
  const CommandResult r = run_cli("bench " + dir.file("tiny.yaml") +
                                  " --steps 1 --warmup 0 --peak-reps 0 --bandwidth-reps 1 --json " + dir.file("b.json"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("memory bandwidth: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("every op but the matrix products and attention: "), std::string::npos) << r.output;
  const std::string json = read_text(dir.path() / "b.json");
  for (const char* key : {"ms_matmul", "mb_matmul", "mb_layernorm", "mb_memory_bound", "ms_memory_bound", "bandwidth_gbs"}) {
    std::smatch m;
    ASSERT_TRUE(std::regex_search(json, m, std::regex(std::string("\"") + key + "\":([0-9.eE+-]+)"))) << key << json;
    EXPECT_GT(std::stod(m[1].str()), 0.0) << key << json;
  }
  // On the CPU synchronize() is free: the timed steps are the unprofiled rate, and bench runs no others.
  std::smatch profiled, unprofiled;
  ASSERT_TRUE(std::regex_search(json, profiled, std::regex("\"ms_per_step\":([0-9.eE+-]+)"))) << json;
  ASSERT_TRUE(std::regex_search(json, unprofiled, std::regex("\"ms_per_step_unprofiled\":([0-9.eE+-]+)"))) << json;
  EXPECT_EQ(profiled[1].str(), unprofiled[1].str());
  EXPECT_EQ(r.output.find("unprofiled "), std::string::npos) << r.output;
}

// The output of `command` run on a pseudo-terminal, as a user at a terminal sees it.
std::string run_on_terminal(const std::string& command) {
  int master = -1;
  const pid_t pid = forkpty(&master, nullptr, nullptr, nullptr);
  if (pid == 0) {
    execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  std::string out;
  if (pid < 0) return out;
  std::array<char, 4096> buffer{};
  ssize_t n;
  while ((n = read(master, buffer.data(), buffer.size())) > 0) out.append(buffer.data(), static_cast<size_t>(n));
  close(master);
  waitpid(pid, nullptr, 0);
  return out;
}

void flip_byte(const std::filesystem::path& path, std::streamoff offset) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(offset);
  const char c = static_cast<char>(f.get());
  f.seekp(offset);
  f.put(static_cast<char>(c ^ 0x01));
}

TEST(Cli, SampleFallsBackPastADamagedCheckpointAndEscapesOnlyOnATerminal) {
  TempDir dir;
  std::string text;
  for (int i = 0; i < 400; ++i) text += "the quick brown fox jumps over the lazy dog. ";
  write_text(dir.path() / "input.txt", text);
  ASSERT_EQ(run_cli("prepare --input " + dir.file("input.txt") + " --out " + dir.file("data")).exit_code, 0);
  write_text(dir.path() / "tiny.yaml", tiny_config(dir));
  CommandResult r = run_cli("train " + dir.file("tiny.yaml") + " --set checkpoint.every=1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto run = dir.path() / "run";
  flip_byte(run / "checkpoints" / "step_00000003" / "model.bin", 2000);

  // The untrained byte model emits control bytes among its 400 (P(none) < 1e-20): raw into a pipe.
  r = run_cli("sample " + run.string() + " --tokens 400", dir.file("sample.err"));
  ASSERT_EQ(r.exit_code, 0) << r.output << read_text(dir.path() / "sample.err");
  const std::string err = read_text(dir.path() / "sample.err");
  EXPECT_NE(err.find("step_00000003' is damaged: model.bin: CRC-32C"), std::string::npos) << err;
  EXPECT_NE(err.find("using '" + (run / "checkpoints" / "step_00000002").string() + "', the newest intact checkpoint"),
            std::string::npos)
      << err;
  EXPECT_TRUE(std::filesystem::exists(run / "checkpoints" / "step_00000003")) << "a reader must not move checkpoints";
  EXPECT_TRUE(std::any_of(r.output.begin(), r.output.end(),
                          [](char c) { return static_cast<unsigned char>(c) < 0x20 && c != '\n' && c != '\t'; }))
      << "no raw control byte in the piped sample";

  // On a terminal: nothing but newlines (the terminal's \r\n) and escapes.
  const std::string shown =
      run_on_terminal(std::string(GPT_TRAIN_EXE) + " sample " + run.string() + " --tokens 400 2>/dev/null");
  EXPECT_GT(shown.size(), 400u) << shown;
  EXPECT_NE(shown.find("\\x"), std::string::npos) << shown;
  for (char c : shown) ASSERT_TRUE(static_cast<unsigned char>(c) >= 0x20 || c == '\n' || c == '\r' || c == '\t') << int(c);

  // A checkpoint named on its own must be intact.
  r = run_cli("sample " + (run / "checkpoints" / "step_00000003").string());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("name its run directory to use the newest intact one"), std::string::npos) << r.output;
}

// libgomp reads its wait policy when it loads, so gpt-train bounds the spinning by re-executing itself
// with GOMP_SPINCOUNT set; a policy the user set is left alone.
TEST(Cli, OpenMpSpinningIsBoundedUnlessTheUserChoseAPolicy) {
  ::unsetenv("GOMP_SPINCOUNT");  // as ctest sets it for the in-process tests
  ::unsetenv("OMP_WAIT_POLICY");
  CommandResult r = run_cli("info");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("spin for GOMP_SPINCOUNT=10000 iterations, then sleep (gpt-train's default"),
            std::string::npos)
      << r.output;
  const std::string exe = GPT_TRAIN_EXE;
  for (const char* env : {"OMP_WAIT_POLICY=active", "GOMP_SPINCOUNT=300000"}) {
    const CommandResult r = run_command("env -u GOMP_SPINCOUNT -u OMP_WAIT_POLICY " + std::string(env) + " " + exe + " info");
    EXPECT_EQ(r.exit_code, 0);
    EXPECT_NE(r.output.find("wait policy from the environment"), std::string::npos) << env << ": " << r.output;
  }
}

TEST(Cli, AShortStartEveryZeroMeansNeverAndNothingToDoIsSaid) {
  TempDir dir;
  std::string text;
  for (int i = 0; i < 400; ++i) text += "the quick brown fox jumps over the lazy dog. ";
  write_text(dir.path() / "input.txt", text);
  ASSERT_EQ(run_cli("prepare --input " + dir.file("input.txt") + " --out " + dir.file("data")).exit_code, 0);
  write_text(dir.path() / "tiny.yaml", tiny_config(dir));
  CommandResult r = run_cli("train " + dir.file("tiny.yaml") + " --set train.eval_every=0 --set train.sample_every=0");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // The console: a few lines before step 1; the full config and ledger are in the run directory.
  const std::string before_step_1 = r.output.substr(0, r.output.find("step     1/3"));
  EXPECT_LT(std::count(before_step_1.begin(), before_step_1.end(), '\n'), 8) << before_step_1;
  EXPECT_EQ(before_step_1.find("resolved configuration"), std::string::npos) << before_step_1;
  EXPECT_NE(before_step_1.find("memory: "), std::string::npos) << before_step_1;
  EXPECT_NE(read_text(dir.path() / "run" / "ledger.txt").find("activations"), std::string::npos);
  const std::string metrics = read_text(dir.path() / "run" / "metrics.jsonl");
  EXPECT_EQ(metrics.find("val_loss"), std::string::npos) << metrics;
  EXPECT_EQ(metrics.find("\"sample\""), std::string::npos) << metrics;

  r = run_cli("train " + dir.file("tiny.yaml") + " --set train.resume=true --set train.backend=auto");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("train.backend auto: the CPU, since "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("nothing to do: the run is at step 3 and train.steps is 3"), std::string::npos) << r.output;

  r = run_cli("sample " + dir.file("run") + " --tokens 1e11");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("--tokens 1e11 is too large: at most 2147483647"), std::string::npos) << r.output;
  r = run_cli("sample " + dir.file("run") + " --tokens 2.5");
  EXPECT_NE(r.output.find("--tokens expects an integer, got '2.5'"), std::string::npos) << r.output;
}

TEST(Cli, ConfigErrorNamesKeyAndLineAndExitsNonZero) {
  TempDir dir;
  write_text(dir.path() / "bad.yaml", "model:\n  n_layer: 2\n  n_layers: 3\n");
  CommandResult r = run_cli("train " + dir.file("bad.yaml"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("bad.yaml:3: unknown key 'model.n_layers'"), std::string::npos) << r.output;
  // Colour only for a terminal, and no source location of ours (log.level: debug shows those).
  EXPECT_EQ(r.output.find('\x1b'), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find(".cpp:"), std::string::npos) << r.output;
  EXPECT_NE(run_on_terminal(std::string(GPT_TRAIN_EXE) + " train " + dir.file("bad.yaml")).find("\x1b["),
            std::string::npos);
  r = run_cli("train " + dir.file("bad.yaml") + " --set model.n_layers=3");
  EXPECT_EQ(r.exit_code, 1);
}

TEST(Cli, MissingShardsAreNamed) {
  TempDir dir;
  write_text(dir.path() / "tiny.yaml", tiny_config(dir));
  CommandResult r = run_cli("train " + dir.file("tiny.yaml"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find(dir.file("data/train_*.bin")), std::string::npos) << r.output;
}

// model.init_from's header is compared with the config's keys at load, and read_llmc_parameters compares the
// file's size with the header before it allocates: a 1 KiB file claiming a bigger model, or the right model
// without its parameters, is refused with what it claims and what it holds.
TEST(Cli, InitFromChecksTheModelFileBeforeAllocating) {
  TempDir dir;
  std::filesystem::create_directories(dir.path() / "data");
  std::vector<uint16_t> tokens(400);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<uint16_t>(i % 200);
  write_shard(dir.file("data/train_000000.bin"), tokens);
  write_shard(dir.file("data/val_000000.bin"), tokens);
  write_text(dir.path() / "tiny.yaml", tiny_config(dir));
  const LlmcModelHeader tiny{32, 256, 2, 2, 16, 256};
  const std::vector<float> params(tiny.num_parameters(), 0.01f);
  write_llmc_model(dir.file("model.bin"), tiny, params);
  // Each attempt is a fresh run into the same run directory, so each sets the previous one aside.
  const std::string train =
      "train " + dir.file("tiny.yaml") + " --set train.steps=0 --set train.overwrite=true --set model.init_from=";

  CommandResult r = run_cli(train + dir.file("model.bin"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("initialised " + std::to_string(params.size()) + " parameters"), std::string::npos)
      << r.output;

  std::filesystem::resize_file(dir.file("model.bin"), 1024);
  r = run_cli(train + dir.file("model.bin"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("model file " + dir.file("model.bin") + ": its header claims the 1024-byte header and " +
                          std::to_string(params.size()) + " fp32 parameters"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("but the file holds 1024 bytes"), std::string::npos) << r.output;

  const LlmcModelHeader xl{1024, 50257, 48, 25, 1600, 50304};
  std::array<int32_t, 256> header{20240326, 3, xl.max_seq_len, xl.vocab_size, xl.num_layers, xl.num_heads,
                                  xl.channels, xl.padded_vocab_size};
  write_bytes(dir.file("xl.bin"), header.data(), sizeof(header));
  r = run_cli(train + dir.file("xl.bin"));
  EXPECT_EQ(r.exit_code, 1);
  // The config's keys are checked against the header at load, before the file's size.
  EXPECT_NE(r.output.find("tiny.yaml:2: model.vocab_size is 256, but model.init_from's checkpoint has 50257 (" +
                          dir.file("xl.bin") + " header: vocab_size)"),
            std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace gpt::test
