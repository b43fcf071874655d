// Optimizer offload on the CUDA backend (on the emulator in CI): the FP32 masters and AdamW moments in host
// memory, AdamW on the host's cores, the updated weights copied back to the device.
//   - Against the same run with AdamW on the device, with and without accumulation, in fp32, bf16 and fp8:
//     the same losses and weights bit for bit. The host runs the CPU backend's AdamW and the device its
//     kernel, which round every operation in one order (src/cpu/adamw.cpp, cuda/kernels/adamw.cu), so
//     moving the optimizer changes no value. Under bf16 and fp8 the FP32 masters are in host memory only
//     and the device casts its compute copy from them through its staging buffer, with the cast kernel
//     the device run casts its own masters with.
//   - A resume of an offloaded run equals the uninterrupted offloaded run bit for bit, in fp32 and bf16.
#include "backend/cuda_entry.h"
#include "config/config_loader.h"
#include "test_util.h"
#include "train/synthetic_run.h"
#include "train/trainer.h"

#include <gtest/gtest.h>

namespace gpt::test {
namespace {

#define SKIP_WITHOUT_CUDA()     \
  if (cuda::device_count() == 0) \
  GTEST_SKIP() << "no CUDA device (" << cuda::describe() << "); gpt_cuda_emu_tests runs these on the emulator"

const std::vector<uint16_t> kPattern = {1, 4, 2, 8, 5, 7, 3, 3, 9, 0, 11, 6, 2, 13, 15, 1, 10};

void expect_offload_equals_device_adamw(int grad_accum_steps, const std::string& recipe = "fp32") {
  TempDir dir;
  Config c = synthetic_run(dir, kPattern, 20000, false);
  c.train.backend = "cuda";
  c.precision.recipe = recipe;
  c.train.steps = 3;
  c.train.batch_size = 4;
  c.train.grad_accum_steps = grad_accum_steps;
  c.model.dropout = 0.1;
  c.log.run_dir = dir.file("device");
  Trainer device(c, config_to_yaml(c));
  device.run();
  c.memory.offload = "optimizer";
  c.log.run_dir = dir.file("offload");
  Trainer offloaded(c, config_to_yaml(c));
  EXPECT_TRUE(offloaded.optimizer().offloaded());
  EXPECT_EQ(offloaded.model().masters_on_host(), recipe != "fp32");
  offloaded.run();
  const auto losses = logged_losses(dir.file("device"));
  ASSERT_EQ(losses.size(), 3u);
  EXPECT_EQ(logged_losses(dir.file("offload")), losses);
  EXPECT_EQ(offloaded.model().parameters_to_host(), device.model().parameters_to_host());
}

TEST(CudaOffload, OffloadedRunEqualsTheDeviceRunBitwise) {
  SKIP_WITHOUT_CUDA();
  expect_offload_equals_device_adamw(1);
}

TEST(CudaOffload, OffloadedRunWithAccumulationEqualsTheDeviceRunBitwise) {
  SKIP_WITHOUT_CUDA();
  expect_offload_equals_device_adamw(2);
}

TEST(CudaOffload, Bf16WithTheMastersOnTheHostEqualsTheDeviceRunBitwise) {
  SKIP_WITHOUT_CUDA();
  expect_offload_equals_device_adamw(2, "bf16");
}

TEST(CudaOffload, Fp8WithTheMastersOnTheHostEqualsTheDeviceRunBitwise) {
  SKIP_WITHOUT_CUDA();
  expect_offload_equals_device_adamw(1, "fp8");
}

TEST(CudaOffload, ResumeOfAnOffloadedRunEqualsTheUninterruptedRun) {
  SKIP_WITHOUT_CUDA();
  TempDir dir;
  const Config base = synthetic_run(dir, kPattern, 20000, false);
  for (const std::string recipe : {"fp32", "bf16"}) {
    SCOPED_TRACE(recipe);
    Config c = base;
    c.train.backend = "cuda";
    c.train.steps = 2;
    c.memory.offload = "optimizer";
    c.precision.recipe = recipe;
    c.log.run_dir = dir.file("straight_" + recipe);
    Trainer straight(c, config_to_yaml(c));
    straight.run();
    EXPECT_EQ(weights_after_resume(c, 1, dir.file("resumed_" + recipe)), straight.model().parameters_to_host());
  }
}

}  // namespace
}  // namespace gpt::test
