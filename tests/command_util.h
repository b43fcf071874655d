// Running gpt-train (or any shell command) as a child process, with its output, for the tests that check
// what a user sees: exit codes, messages, files written by a separate process.
#pragma once

#include <array>
#include <cstdio>
#include <string>

#include <sys/wait.h>

namespace gpt::test {

struct CommandResult {
  int exit_code = -1;  // -1: the command did not exit normally (a signal) or could not start
  std::string output;  // stdout, and stderr where the command line sends it there
};

// Runs `command` through the shell and collects its stdout.
inline CommandResult run_command(const std::string& command) {
  CommandResult result;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return result;
  std::array<char, 4096> buffer{};
  while (const size_t n = std::fread(buffer.data(), 1, buffer.size(), pipe)) result.output.append(buffer.data(), n);
  const int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

#ifdef GPT_TRAIN_EXE
// `gpt-train ARGS`, stderr joined to stdout unless `stderr_to` names a file for it.
inline CommandResult run_cli(const std::string& args, const std::string& stderr_to = "") {
  return run_command(std::string(GPT_TRAIN_EXE) + " " + args + " 2>" + (stderr_to.empty() ? "&1" : stderr_to));
}
#endif

}  // namespace gpt::test
