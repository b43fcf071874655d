// Errors: library code throws gpt::Error carrying file:line; main() catches and prints one line.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace gpt {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

[[noreturn]] inline void throw_error(const char* file, int line, const std::string& message) {
  throw Error(fmt::format("{} ({}:{})", message, file, line));
}

}  // namespace gpt

// GPT_CHECK(cond, "format {}", args...): throws gpt::Error with the message, file and line when cond is false.
#define GPT_CHECK(cond, ...)                                     \
  do {                                                           \
    if (!(cond)) ::gpt::throw_error(__FILE__, __LINE__, fmt::format(__VA_ARGS__)); \
  } while (0)

#define GPT_FAIL(...) ::gpt::throw_error(__FILE__, __LINE__, fmt::format(__VA_ARGS__))
