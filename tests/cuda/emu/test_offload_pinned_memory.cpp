// Optimizer offload's host memory on the emulated CUDA backend, asked of the emulator's allocation registry:
//   - an arena pinned through the device is pinned host memory, and ordinary memory where pinning is refused
//     (a host at its page-locked limit);
//   - the FP32 masters and the gradients' host copy of an offloaded run are pinned host memory, AdamW's copy
//     of the masters (fp32) or the model's own masters kept on the host with the compute copy's twin (bf16,
//     one rank);
//   - where pinning is refused for some or all of them, the run, whose copies from ordinary memory hold the
//     host until done, equals the pinned run bit for bit.
#include "backend/cuda_entry.h"
#include "config/config_loader.h"
#include "core/arena.h"
#include "cuda/emu/emu_test_util.h"
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
    Arena pinned(plan, *host, device.get());
    EXPECT_TRUE(pinned.pinned());
    EXPECT_TRUE(emu::is_pinned_host_memory(pinned.base(), plan.total_bytes()));
    EXPECT_EQ(pinned.tensor(1).device, Device::CPU);
  }
  emu::fail_pinned_allocations(1);
  Arena ordinary(plan, *host, device.get());
  EXPECT_FALSE(ordinary.pinned());
  EXPECT_FALSE(emu::is_pinned_host_memory(ordinary.base(), 1));
  // The refusal is not left behind as the device's error.
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

TEST_F(EmuTest, AnOffloadedRunWithPinningRefusedEqualsThePinnedRunBitwise) {
  TempDir dir;
  // fp32 keeps the masters on the device and AdamW a host copy of them, its first pinned allocation, then
  // the gradients' copy; refusing one pins only the gradients' copy, two nothing. bf16 on one rank keeps
  // them only on the host, in the model's parameter arena (the first), then the compute copy's twin, then
  // AdamW's gradient copy: refusing k pins the last 3 - k of them.
  for (const std::string recipe : {"fp32", "bf16"}) {
    SCOPED_TRACE(recipe);
    Config c = gpt::test::offload_run(dir, "cuda", 2, 4, 2);
    c.precision.recipe = recipe;
    std::vector<std::vector<float>> weights;
    std::vector<std::map<int64_t, double>> losses;
    const bool bf16 = recipe == "bf16";
    for (const int refused : bf16 ? std::vector<int>{0, 1, 2, 3} : std::vector<int>{0, 1, 2}) {
      SCOPED_TRACE(refused);
      c.log.run_dir = dir.file(recipe + "_refused_" + std::to_string(refused));
      emu::fail_pinned_allocations(refused);
      Trainer t(c, config_to_yaml(c));
      emu::fail_pinned_allocations(0);
      EXPECT_EQ(t.optimizer().host_memory_pinned(), bf16 ? refused < 3 : refused == 0);
      EXPECT_EQ(t.model().masters_on_host(), bf16);
      EXPECT_EQ(t.model().masters_pinned(), bf16 && refused == 0);
      if (bf16) {
        const Arena& masters = t.model().parameter_arena();
        EXPECT_EQ(emu::is_pinned_host_memory(masters.base(), masters.layout().total_bytes()), refused == 0);
        const Arena* twin = t.model().host_compute_arena();
        ASSERT_NE(twin, nullptr);
        EXPECT_EQ(twin->pinned(), refused < 2);
        EXPECT_EQ(emu::is_pinned_host_memory(twin->base(), twin->layout().total_bytes()), refused < 2);
      }
      t.run();
      weights.push_back(t.model().parameters_to_host());
      losses.push_back(gpt::test::logged_losses(c.log.run_dir));
    }
    ASSERT_EQ(losses[0].size(), 2u);
    for (size_t i = 1; i < losses.size(); ++i) {
      EXPECT_EQ(losses[i], losses[0]);
      EXPECT_EQ(weights[i], weights[0]);
    }
  }
}

}  // namespace
}  // namespace gpt::cuda::test
