// An arena that does not fit says which planned block failed, how large it is, and what to change.
#include "core/arena.h"

#include "cpu/gradcheck.h"
#include "test_util.h"

#include <gtest/gtest.h>

#if defined(__SANITIZE_ADDRESS__)
#define GPT_TEST_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define GPT_TEST_UNDER_ASAN 1
#endif
#endif

namespace gpt::test {
namespace {

TEST(Arena, AnAllocationThatDoesNotFitNamesTheArenaAndWhatToChange) {
#if defined(GPT_TEST_UNDER_ASAN)
  GTEST_SKIP() << "AddressSanitizer aborts on an allocation above its maximum instead of returning null";
#endif
  ArenaLayout layout("activations");
  layout.add("small", {16});
  layout.add("probs", {int64_t{1} << 48});  // 1 PiB of f32: no machine has it
  const std::string message = error_message([&] { Arena arena(std::move(layout), cpu_backend()); });
  EXPECT_NE(message.find("arena 'activations'"), std::string::npos) << message;
  EXPECT_NE(message.find("the largest 'probs'"), std::string::npos) << message;
  EXPECT_NE(message.find("train.batch_size"), std::string::npos) << message;
  EXPECT_NE(message.find("cpu backend: could not allocate"), std::string::npos) << message;
}

}  // namespace
}  // namespace gpt::test
