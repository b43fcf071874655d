// Optimizer offload's device memory on the emulated CUDA backend, asked of the emulator's allocation
// registry (cudaMemGetInfo): under bf16 and fp8 the device holds no FP32 masters (they are pinned host
// memory) and no AdamW moments; bf16's compute copy has a pinned twin on the host instead, fp8 a staging
// buffer beside the copy on the device; the bytes the device gives up are what the ledger plans, to the
// byte; its first step writes exactly the planned activations.
#include "backend/cuda_entry.h"
#include "config/config_loader.h"
#include "cuda/emu/emu_test_util.h"
#include "memory/planner.h"
#include "test_util.h"
#include "train/synthetic_run.h"
#include "train/trainer.h"

#include <gtest/gtest.h>

namespace gpt::cuda::test {
namespace {

using gpt::test::TempDir;

size_t device_bytes_in_use() {
  size_t free = 0, total = 0;
  CUDA_CHECK(cudaMemGetInfo(&free, &total));
  return total - free;
}

// The device bytes a trainer of `c` holds once built (its backend, arenas and optimizer), before any step.
size_t trainer_device_bytes(const Config& c, bool expect_masters_on_host) {
  const size_t before = device_bytes_in_use();
  Trainer t(c, config_to_yaml(c));
  EXPECT_EQ(t.model().masters_on_host(), expect_masters_on_host);
  if (expect_masters_on_host) {
    EXPECT_TRUE(t.model().masters_pinned());
    const Arena& masters = t.model().parameter_arena();
    EXPECT_TRUE(emu::is_pinned_host_memory(masters.base(), masters.layout().total_bytes()));
    if (const Arena* twin = t.model().host_compute_arena())
      EXPECT_TRUE(emu::is_pinned_host_memory(twin->base(), twin->layout().total_bytes()));
    EXPECT_EQ(t.model().parameter_arena().tensor(0).device, Device::CPU);
  }
  return device_bytes_in_use() - before;
}

TEST_F(EmuTest, UnderOffloadANarrowRecipeLeavesNoFp32MastersOnTheDevice) {
  TempDir dir;
  const Config base = gpt::test::synthetic_run(dir, {1, 4, 2, 8, 5, 7, 3, 3, 9, 0, 11, 6, 2, 13, 15, 1, 10}, 20000, false);
  const BackendCapabilities caps = cuda::make_backend()->capabilities();
  for (const std::string recipe : {"bf16", "fp8"}) {
    SCOPED_TRACE(recipe);
    Config plain = base;
    plain.train.backend = "cuda";
    plain.precision.recipe = recipe;
    plain.log.run_dir = dir.file("plain_" + recipe);
    Config offloaded = plain;
    offloaded.memory.offload = "optimizer";
    offloaded.log.run_dir = dir.file("offload_" + recipe);
    const size_t plain_bytes = trainer_device_bytes(plain, false);
    const size_t offload_bytes = trainer_device_bytes(offloaded, true);

    const RecomputePolicy policy = resolve_recompute(plain.recompute, plain.model.n_layer);
    const MemoryLedger lp = ledger_for(plain, policy, plain.train.batch_size, caps),
                       lo = ledger_for(offloaded, policy, plain.train.batch_size, caps);
    EXPECT_EQ(lo.master_staging > 0, recipe == "fp8");
    EXPECT_EQ(lo.host_compute_weights, recipe == "bf16" ? lo.compute_weights : 0u);
    EXPECT_EQ(lo.parameters, 0u);
    // Measured against planned: the FP32 masters and the moments leave, under fp8 the staging buffer comes.
    EXPECT_EQ(plain_bytes - offload_bytes, lp.total() - lo.total());
    EXPECT_EQ(lp.total() - lo.total(), lp.parameters + lp.optimizer - lo.master_staging);
    offloaded.train.steps = 1;
    Trainer t(offloaded, config_to_yaml(offloaded));
    EXPECT_EQ(t.run().measured_activation_bytes, lo.activations());
  }
}

}  // namespace
}  // namespace gpt::cuda::test
