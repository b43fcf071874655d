// Running `gpt-train train` as a child process for the crash, kill and signal tests: spawn with its
// output in a log file, signal it, wait for it; and a tiny synthetic run to train.
#pragma once

#include "config/config_loader.h"
#include "data/shard.h"
#include "io/durable_file.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <cstring>
#include <optional>

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace gpt::test {

class TrainProcess {
 public:
  // gpt-train train CONFIG --set ... with stdout and stderr appended to log_path.
  TrainProcess(const std::string& config_path, const std::vector<std::string>& sets, const std::string& log_path) {
    std::vector<std::string> args = {GPT_TRAIN_EXE, "train", config_path};
    for (const auto& s : sets) args.insert(args.end(), {"--set", s});
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
    const int rc = posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) {
      ADD_FAILURE() << "cannot start " << GPT_TRAIN_EXE << ": " << std::strerror(rc);
      pid_ = -1;
    }
  }
  ~TrainProcess() {
    if (pid_ > 0 && !status_) {
      ::kill(pid_, SIGKILL);
      wait();
    }
  }
  TrainProcess(const TrainProcess&) = delete;
  TrainProcess& operator=(const TrainProcess&) = delete;

  pid_t pid() const { return pid_; }
  void signal(int sig) {
    if (pid_ > 0 && !status_) ::kill(pid_, sig);
  }
  // Whether it has exited (reaps it when it has).
  bool exited() {
    if (status_) return true;
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) status_ = status;
    return status_.has_value();
  }
  int wait() {
    if (!status_) {
      int status = 0;
      while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
      }
      status_ = status;
    }
    return *status_;
  }

 private:
  pid_t pid_ = -1;
  std::optional<int> status_;
};

inline bool exited_with(int status, int code) { return WIFEXITED(status) && WEXITSTATUS(status) == code; }
inline bool killed_by(int status, int sig) { return WIFSIGNALED(status) && WTERMSIG(status) == sig; }

inline std::string read_text(const std::string& path) {
  std::error_code ec;
  return std::filesystem::exists(path, ec) ? read_file_bytes(path) : std::string();
}

// step -> the loss exactly as metrics.jsonl wrote it, for bitwise comparisons; fails on a step written twice.
inline std::map<int64_t, std::string> losses_by_step(const std::string& metrics_path) {
  std::map<int64_t, std::string> out;
  const std::string text = read_text(metrics_path);
  size_t begin = 0;
  while (begin < text.size()) {
    size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(begin, end - begin);
    begin = end + 1;
    const size_t loss = line.find(",\"loss\":");
    if (line.rfind("{\"step\":", 0) != 0 || loss == std::string::npos) continue;
    const int64_t step = std::stoll(line.substr(8));
    const size_t value = loss + 8;
    const bool inserted = out.emplace(step, line.substr(value, line.find(',', value) - value)).second;
    EXPECT_TRUE(inserted) << "step " << step << " appears twice in " << metrics_path;
  }
  return out;
}

// A tiny model on a synthetic shard, dropout on so the Philox streams are part of what must resume
// exactly; written as a YAML file the child reads.
inline std::string write_tiny_run_config(const TempDir& dir, int steps, int checkpoint_every, int n_embd = 32,
                                         int n_layer = 2) {
  std::vector<uint16_t> tokens(40000);
  uint32_t x = 17;
  for (auto& t : tokens) t = static_cast<uint16_t>((x = x * 1664525u + 1013904223u) >> 28);
  write_shard(dir.file("train_000000.bin"), tokens);
  write_shard(dir.file("val_000000.bin"), std::vector<uint16_t>(tokens.begin(), tokens.begin() + 4000));
  Config c;
  c.model = tiny_model(16, n_layer, n_embd, 2, 32);
  c.model.dropout = 0.1;
  c.data.train = dir.file("train_*.bin");
  c.data.val = dir.file("val_*.bin");
  c.train.batch_size = 4;
  c.train.seq_len = 32;
  c.train.threads = 1;
  c.train.steps = steps;
  c.train.eval_every = 5;
  c.train.eval_batches = 2;
  c.train.sample_every = 7;
  c.train.sample_tokens = 8;
  c.optim.warmup_steps = 3;
  c.checkpoint.every = checkpoint_every;
  c.log.run_dir = dir.file("run");
  c.log.every = 1;
  const std::string path = dir.file("config.yaml");
  write_file_durably(path, config_to_yaml(c));
  return path;
}

inline void sleep_ms(double ms) { std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(ms)); }

}  // namespace gpt::test
