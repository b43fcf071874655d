// gpt-train: subcommand dispatch. Everything below main() throws gpt::Error; this is the one place
// that turns an error into a message and an exit code.
#include "cli/commands.h"
#include "cli/openmp_env.h"
#include "core/error.h"
#include "core/printable.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <iostream>

int main(int argc, char** argv) {
  gpt::bound_openmp_spinning(argv);
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    std::cout << gpt::general_help();
    return args.empty() ? 2 : 0;
  }
  const auto& commands = gpt::commands();
  auto command = std::find_if(commands.begin(), commands.end(), [&](const gpt::Command& c) { return c.name == args[0]; });
  if (command == commands.end()) {
    std::cerr << "gpt-train: unknown command '" << args[0] << "'\n\n" << gpt::general_help();
    return 2;
  }
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  if (std::find(rest.begin(), rest.end(), "--help") != rest.end() || std::find(rest.begin(), rest.end(), "-h") != rest.end()) {
    std::cout << command->help();
    return 0;
  }
  spdlog::set_pattern("[%H:%M:%S] %^%l%$ %v");
  try {
    return command->run(rest);
  } catch (const std::exception& e) {
    // Escaped, since a message may quote bytes of a damaged file; source locations only at log.level: debug.
    spdlog::error("{}", gpt::message_for_log(e.what()));
    return 1;
  }
}
