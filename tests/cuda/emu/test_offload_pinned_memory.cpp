// Optimizer offload's host memory on the emulated CUDA backend, asked of the emulator's allocation registry:
//   - the FP32 masters and the gradients' host copy of an offloaded run are pinned host memory;
//   - where pinning is refused (a host at its page-locked limit) they fall back to ordinary memory, and the
//     run, whose copies then hold the host until done, equals the pinned run bit for bit.
#include "backend/cuda_entry.h"
#include "config/config_loader.h"
#include "cuda/emu/emu_test_util.h"
#include "optim/host_arena.h"
#include "test_util.h"
#include "train/synthetic_run.h"
#include "train/trainer.h"

#include <gtest/gtest.h>

namespace gpt::cuda::test {
namespace {

using gpt::test::TempDir;

TEST_F(EmuTest, OffloadedHostStateIsPinnedAndFallsBackToOrdinaryMemoryWhenRefused) {
  std::unique_ptr<Backend> device = cuda::make_backend();
  std::unique_ptr<Backend> host = gpt::make_backend(BackendKind::Cpu, {1});
  ArenaLayout plan("offload_masters");
  plan.add("wte", {4096}, DType::F32);
  plan.add("wpe", {100}, DType::BF16);
  {
    HostArena pinned(plan, *device, *host);
    EXPECT_TRUE(pinned.pinned());
    EXPECT_TRUE(emu::is_pinned_host_memory(pinned.base(), plan.total_bytes()));
    EXPECT_EQ(pinned.tensor(1).device, Device::CPU);
  }
  emu::fail_pinned_allocations(1);
  HostArena ordinary(plan, *device, *host);
  EXPECT_FALSE(ordinary.pinned());
  EXPECT_FALSE(emu::is_pinned_host_memory(ordinary.base(), 1));
  // The refusal is not left behind as the device's error.
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

TEST_F(EmuTest, AnOffloadedRunWithPinningRefusedEqualsThePinnedRunBitwise) {
  TempDir dir;
  Config c = gpt::test::offload_run(dir, "cuda", 2, 4, 2);
  std::vector<std::vector<float>> weights;
  std::vector<std::map<int64_t, double>> losses;
  for (const bool pin : {true, false}) {
    c.log.run_dir = dir.file(pin ? "pinned" : "ordinary");
    emu::fail_pinned_allocations(pin ? 0 : 2);  // the masters and the gradients' copy
    Trainer t(c, config_to_yaml(c));
    emu::fail_pinned_allocations(0);
    EXPECT_EQ(t.optimizer().host_memory_pinned(), pin);
    t.run();
    weights.push_back(t.model().parameters_to_host());
    losses.push_back(gpt::test::logged_losses(c.log.run_dir));
  }
  ASSERT_EQ(losses[0].size(), 2u);
  EXPECT_EQ(losses[1], losses[0]);
  EXPECT_EQ(weights[1], weights[0]);
}

}  // namespace
}  // namespace gpt::cuda::test
