// Arenas:
//   - one that does not fit says which planned block failed, how large it is, and what to change;
//   - pinned through a device backend, the block is that backend's pinned memory, given back to it; where it
//     has none or refuses, the host backend's ordinary memory; the views are the host backend's either way.
#include "core/arena.h"

#include "backend/forwarding_backend.h"
#include "cpu/gradcheck.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <vector>

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

// A device that says it gives pinned memory and keeps account of what it gave and took back; `refuse` makes
// it refuse, as a host at its page-locked limit does.
class PinningDevice final : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  BackendCapabilities capabilities() const override {
    BackendCapabilities caps = ForwardingBackend::capabilities();
    caps.pinned_host_memory = has_pinned;
    return caps;
  }
  void* allocate_pinned(size_t bytes) override {
    ++asked;
    if (refuse) return nullptr;
    given.push_back(std::malloc(bytes));
    return given.back();
  }
  void deallocate_pinned(void* ptr) override {
    taken_back.push_back(ptr);
    std::free(ptr);
  }
  bool has_pinned = true, refuse = false;
  int asked = 0;
  std::vector<void*> given, taken_back;
};

TEST(Arena, PinnedThroughADeviceTakesItsPinnedMemoryAndFallsBackToTheHostsWhenRefused) {
  ArenaLayout layout("offload_masters");
  layout.add("wte", {1000}, DType::F32);
  layout.add("wpe", {77}, DType::BF16);
  PinningDevice device(cpu_backend());
  void* pinned_base = nullptr;
  {
    Arena arena(layout, cpu_backend(), &device);
    EXPECT_TRUE(arena.pinned());
    ASSERT_EQ(device.given.size(), 1u);
    EXPECT_EQ(arena.base(), device.given[0]);
    EXPECT_EQ(arena.tensor(1).device, cpu_backend().device());
    EXPECT_EQ(arena.tensor(1).numel(), 77);
    pinned_base = arena.base();
  }
  EXPECT_EQ(device.taken_back, std::vector<void*>{pinned_base});

  device.refuse = true;
  {
    Arena arena(layout, cpu_backend(), &device);
    EXPECT_EQ(device.asked, 2);
    EXPECT_FALSE(arena.pinned());
    ASSERT_NE(arena.base(), nullptr);
    EXPECT_EQ(device.given.size(), 1u);
  }
  EXPECT_EQ(device.taken_back.size(), 1u);

  // A device without pinned memory is not asked for any.
  device.has_pinned = false;
  device.refuse = false;
  Arena arena(layout, cpu_backend(), &device);
  EXPECT_FALSE(arena.pinned());
  EXPECT_EQ(device.asked, 2);
  // Without a device to pin through, ordinary memory.
  EXPECT_FALSE(Arena(layout, cpu_backend()).pinned());
}

}  // namespace
}  // namespace gpt::test
