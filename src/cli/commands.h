// The subcommands of gpt-train. Each takes the arguments after its name and returns the exit code;
// errors are thrown as gpt::Error and reported by main().
#pragma once

#include <string>
#include <vector>

namespace gpt {

struct Command {
  std::string name;
  std::string summary;
  int (*run)(const std::vector<std::string>& args);
  std::string (*help)();
};

const std::vector<Command>& commands();
std::string general_help();

// A checkpoint directory, or a run directory (its newest checkpoint); throws when it is damaged.
std::string resolve_checkpoint(const std::string& path);

}  // namespace gpt
