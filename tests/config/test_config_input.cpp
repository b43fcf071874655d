// Config files that are not configs: empty, huge, nested without end, holding control bytes.
#include "config/config_loader.h"
#include "core/printable.h"
#include "io/durable_file.h"
#include "test_util.h"

#include <gtest/gtest.h>

namespace gpt::test {
namespace {

TEST(ConfigInput, AnEmptyFileIsAnErrorNotEveryDefault) {
  TempDir dir;
  for (const char* text : {"", "\n\n", "# only a comment\n  \n", "---\n"}) {
    write_file_durably(dir.file("empty.yaml"), text);
    const std::string message = error_message([&] { load_config(dir.file("empty.yaml")); });
    EXPECT_NE(message.find("empty.yaml' is empty (no key)"), std::string::npos) << message;
  }
  write_file_durably(dir.file("one.yaml"), "train:\n  steps: 5\n");
  EXPECT_EQ(load_config(dir.file("one.yaml")).train.steps, 5);
}

TEST(ConfigInput, AFileLargerThanAnyConfigIsRefusedBeforeParsing) {
  TempDir dir;
  std::string big = "train:\n";
  while (big.size() <= kMaxConfigBytes) big += "  # padding padding padding padding padding padding padding\n";
  write_file_durably(dir.file("big.yaml"), big);
  const std::string message = error_message([&] { load_config(dir.file("big.yaml")); });
  EXPECT_NE(message.find("larger than any config (at most 1048576)"), std::string::npos) << message;
}

TEST(ConfigInput, DeepNestingNamesItsLine) {
  std::string flow = "model:\n  n_layer: 2\ntrain: " + std::string(100, '[') + std::string(100, ']') + "\n";
  std::string message = error_message([&] { load_config_from_string(flow, {}, "deep.yaml"); });
  EXPECT_NE(message.find("deep.yaml:3: nesting too deep at line 3"), std::string::npos) << message;
  std::string block = "model:\n";
  for (int i = 1; i < 60; ++i) block += std::string(2 * static_cast<size_t>(i), ' ') + "k" + std::to_string(i) + ":\n";
  message = error_message([&] { load_config_from_string(block, {}, "deep.yaml"); });
  EXPECT_NE(message.find("nesting too deep at line 33"), std::string::npos) << message;
  std::string items = "a:\n";
  for (int i = 0; i < 40; ++i) items += "- ";
  message = error_message([&] { load_config_from_string(items + "x\n", {}, "items.yaml"); });
  EXPECT_NE(message.find("items.yaml:2: nesting too deep"), std::string::npos) << message;
  // Brackets in quotes and comments are text.
  EXPECT_EQ(load_config_from_string("train:\n  sample_prompt: \"" + std::string(100, '[') + "\"  # " +
                                    std::string(100, '{') + "\n")
                .train.sample_prompt,
            std::string(100, '['));
}

TEST(ConfigInput, ControlBytesInAMessageAreShownEscaped) {
  const std::string message = error_message([] { load_config_from_string("model:\n  n_l\x1b[2Jayer\x01: 2\n"); });
  const std::string shown = message_for_log(message);
  EXPECT_NE(shown.find("n_l\\x1b[2Jayer\\x01"), std::string::npos) << shown;
  EXPECT_EQ(shown.find('\x1b'), std::string::npos);
  // And without our source locations, which only log.level: debug shows.
  EXPECT_NE(message.find(".cpp:"), std::string::npos) << message;
  EXPECT_EQ(shown.find(".cpp:"), std::string::npos) << shown;
}

}  // namespace
}  // namespace gpt::test
