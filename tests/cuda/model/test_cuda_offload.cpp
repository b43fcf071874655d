// Optimizer offload on the CUDA backend (on the emulator in CI): the FP32 masters and AdamW moments in host
// memory, AdamW on the host's cores, the updated weights copied back to the device.
//   - Against the same run with AdamW on the device: equal within a tolerance, not bitwise. The host runs the
//     CPU backend's AdamW and the device its kernel, the same formula in FP32 whose multiply-adds the two
//     compilers contract differently (cuda/kernels/adamw.cu says so), so each update may differ in the last
//     bit of a weight. On the emulator, 2 fp32 steps with accumulation: weights within 1e-5 of their largest,
//     losses within 1e-6 relative (measured over 3 steps: 5.9e-7 and 1.4e-9; a stale or misplaced gradient
//     moves weights by about the learning rate, 1e-2). The CPU backend's offload is bitwise
//     (tests/train/test_offload.cpp), which shows the offload itself changes no value.
//   - A resume of an offloaded run equals the uninterrupted offloaded run bit for bit.
#include "backend/cuda_entry.h"
#include "config/config_loader.h"
#include "test_util.h"
#include "train/synthetic_run.h"
#include "train/trainer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace gpt::test {
namespace {

#define SKIP_WITHOUT_CUDA()     \
  if (cuda::device_count() == 0) \
  GTEST_SKIP() << "no CUDA device (" << cuda::describe() << "); gpt_cuda_emu_tests runs these on the emulator"

const std::vector<uint16_t> kPattern = {1, 4, 2, 8, 5, 7, 3, 3, 9, 0, 11, 6, 2, 13, 15, 1, 10};

TEST(CudaOffload, OffloadedRunEqualsTheDeviceRunWithinTheAdamWContractionTolerance) {
  SKIP_WITHOUT_CUDA();
  TempDir dir;
  Config c = synthetic_run(dir, kPattern, 20000, false);
  c.train.backend = "cuda";
  c.train.steps = 2;
  c.train.batch_size = 4;
  c.train.grad_accum_steps = 2;
  c.model.dropout = 0.1;
  c.log.run_dir = dir.file("device");
  Trainer device(c, config_to_yaml(c));
  device.run();
  c.memory.offload = "optimizer";
  c.log.run_dir = dir.file("offload");
  Trainer offloaded(c, config_to_yaml(c));
  EXPECT_TRUE(offloaded.optimizer().offloaded());
  offloaded.run();
  const auto ld = logged_losses(dir.file("device")), lo = logged_losses(dir.file("offload"));
  ASSERT_EQ(ld.size(), 2u);
  ASSERT_EQ(lo.size(), 2u);
  double worst_loss = 0.0;
  for (const auto& [step, loss] : ld) worst_loss = std::max(worst_loss, std::fabs(lo.at(step) - loss) / std::fabs(loss));
  const std::vector<float> a = device.model().parameters_to_host(), b = offloaded.model().parameters_to_host();
  ASSERT_EQ(a.size(), b.size());
  double max_diff = 0.0, max_abs = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    max_diff = std::max(max_diff, std::fabs(static_cast<double>(a[i]) - b[i]));
    max_abs = std::max(max_abs, std::fabs(static_cast<double>(a[i])));
  }
  std::printf("  CUDA offload vs AdamW on the device, 2 fp32 steps: losses %.2e relative, weights %.2e of their largest\n",
              worst_loss, max_diff / max_abs);
  EXPECT_LT(worst_loss, 1e-6);
  EXPECT_LT(max_diff / max_abs, 1e-5);
}

TEST(CudaOffload, ResumeOfAnOffloadedRunEqualsTheUninterruptedRun) {
  SKIP_WITHOUT_CUDA();
  TempDir dir;
  Config c = synthetic_run(dir, kPattern, 20000, false);
  c.train.backend = "cuda";
  c.train.steps = 2;
  c.memory.offload = "optimizer";
  c.log.run_dir = dir.file("straight");
  Trainer straight(c, config_to_yaml(c));
  straight.run();
  EXPECT_EQ(weights_after_resume(c, 1, dir.file("resumed")), straight.model().parameters_to_host());
}

}  // namespace
}  // namespace gpt::test
