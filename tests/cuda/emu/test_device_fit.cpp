// A run too big for its device stops before anything of the plan is allocated, saying what it needs, what
// the device has and which memory.budget fits; with that budget, and with memory.budget: auto, the
// planner's run fits and trains. An allocation that fails all the same (another process took the memory
// after the check) names the arena, its bytes and what the device has free. On a small emulated device
// (emu::configure_device), so this lives with the emulator's tests.
#include "backend/cuda_entry.h"
#include "core/arena.h"
#include "emu/control.h"
#include "memory/planner.h"
#include "train/synthetic_run.h"

#include <gtest/gtest.h>

#include <regex>

namespace gpt::test {
namespace {

// The emulated device for one test, the default one back afterwards whatever the test did.
struct DeviceOfSize {
  explicit DeviceOfSize(uint64_t bytes) {
    cuda::emu::DeviceConfig config;
    config.global_memory_bytes = bytes;
    cuda::emu::configure_device(config);
  }
  ~DeviceOfSize() { cuda::emu::configure_device(cuda::emu::DeviceConfig{}); }
};

TEST(DeviceFit, ARunTooBigForTheDeviceStopsAndNamesABudgetThatFits) {
  TempDir dir;
  Config c = synthetic_run(dir, cycle_pattern(), 20000, false);
  c.train.backend = "cuda";
  c.train.steps = 2;
  c.train.batch_size = 16;
  const uint64_t planned = ledger_for(c, resolve_recompute(c.recompute, c.model.n_layer), c.train.batch_size,
                                      cuda::make_backend()->capabilities())
                               .total();
  // The backend's own workspace (about 40 MiB) fits, the plan's arenas beside it do not.
  DeviceOfSize small(planned - (uint64_t{1} << 19));
  const std::string message = error_message([&] { Trainer(c, config_to_yaml(c)); });
  EXPECT_NE(message.find("of device memory (parameters"), std::string::npos) << message;
  EXPECT_NE(message.find("more than the device can give it"), std::string::npos) << message;
  EXPECT_NE(message.find("of it this backend's workspace"), std::string::npos) << message;
  std::smatch budget;
  ASSERT_TRUE(std::regex_search(message, budget, std::regex("set memory.budget: ([0-9]+MiB)"))) << message;

  Config chosen;
  {
    c.memory.budget = budget[1].str();
    c.log.run_dir = dir.file("budgeted");
    Trainer fitted(c, config_to_yaml(c));
    EXPECT_EQ(fitted.run().status, TrainStatus::Completed);
    chosen = fitted.config();
  }
  EXPECT_LT(chosen.train.batch_size, 16) << "the planner should have shrunk the micro-batch";

  // memory.budget: auto takes what the device can give the run as it starts (to the byte, where the
  // suggestion is rounded down to a MiB, so the planner may keep more): a plan that fits, not the config's.
  c.memory.budget = "auto";
  c.log.run_dir = dir.file("auto");
  Trainer automatic(c, config_to_yaml(c));
  EXPECT_EQ(automatic.run().status, TrainStatus::Completed);
  EXPECT_TRUE(automatic.config().precision.recipe != "fp32" || automatic.config().train.batch_size < 16);
}

// The check above passed, and then the device could not give an arena (another process took the memory in
// between): the error names the planned arena, its largest buffer, the bytes asked for, what the device
// has free and what the run already holds, and what the user can change.
TEST(DeviceFit, AnArenaTheDeviceCannotGiveNamesItselfTheBytesAndWhatIsFree) {
  DeviceOfSize small(uint64_t{256} << 20);
  const std::unique_ptr<Backend> backend = cuda::make_backend();
  ArenaLayout layout("activations");
  layout.add("probs", {64, 1024, 1024});  // 256 MiB: with the backend's workspace held, more than is free
  layout.add("lse", {64, 1024});
  const std::string message = error_message([&] { Arena arena(layout, *backend); });
  for (const std::string expected :
       {"the memory plan's arena 'activations' (256.2 MiB in 2 buffers, the largest 'probs' 256.0 MiB)",
        "cudaMalloc of 0.25 GiB (268697600 bytes) failed on device 0 (", "of 0.25 GiB free,",
        "held by this run's arenas", "Lower train.batch_size", "`gpt-train plan CONFIG`"})
    EXPECT_NE(message.find(expected), std::string::npos) << expected << "\n" << message;
}

}  // namespace
}  // namespace gpt::test
