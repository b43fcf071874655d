// Every file of every fuzz corpus (tests/fuzz/<target>/: seeds, and each input a fuzzer once found a bug
// with) through its target, in every build: a fixed bug stays fixed without clang or libFuzzer.
#include "fuzz_targets.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>

namespace fs = std::filesystem;

namespace gpt::fuzz {
namespace {

TEST(FuzzCorpus, EveryInputIsHandledCleanly) {
  size_t inputs = 0;
  for (const Target& t : targets()) {
    const fs::path dir = fs::path(GPT_SOURCE_DIR) / "tests" / "fuzz" / t.name;
    ASSERT_TRUE(fs::is_directory(dir)) << dir;
    size_t here = 0;
    for (const auto& entry : fs::directory_iterator(dir)) {
      if (!entry.is_regular_file()) continue;
      std::ifstream in(entry.path(), std::ios::binary);
      const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      SCOPED_TRACE(entry.path().string());
      t.run(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());  // a crash fails the test
      ++here;
    }
    EXPECT_GT(here, 0u) << "no seed inputs in " << dir;
    inputs += here;
  }
  RecordProperty("inputs", static_cast<int>(inputs));
}

}  // namespace
}  // namespace gpt::fuzz
