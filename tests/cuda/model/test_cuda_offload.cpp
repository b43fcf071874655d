// Optimizer offload on the CUDA backend (on the emulator in CI): the FP32 masters and AdamW moments in host
// memory, AdamW on the host's cores, the updated weights copied back to the device.
//   - Against the same run with AdamW on the device, with and without accumulation (dropout and clipping
//     active), in fp32, bf16 and fp8: the same losses and weights bit for bit. The host runs the CPU
//     backend's AdamW and the device its kernel, which round every operation in one order
//     (src/cpu/adamw.cpp, cuda/kernels/adamw.cu), so moving the optimizer changes no value. Under bf16 and
//     fp8 the FP32 masters are in host memory only and the device casts its compute copy from them through
//     its staging buffer, with the cast kernel the device run casts its own masters with.
//   - A resume of an offloaded run equals the uninterrupted offloaded run bit for bit, in fp32 and bf16.
#include "backend/cuda_entry.h"
#include "cuda/model/skip_without_cuda.h"
#include "config/config_loader.h"
#include "test_util.h"
#include "train/synthetic_run.h"
#include "train/trainer.h"

#include <gtest/gtest.h>

namespace gpt::test {
namespace {

TEST(CudaOffload, OffloadedRunEqualsTheDeviceRunBitwise) {
  SKIP_WITHOUT_CUDA();
  TempDir dir;
  expect_offload_equals_device_bitwise(dir, offload_run(dir, "cuda", 3, 4, 1), "run");
}

TEST(CudaOffload, OffloadedRunWithAccumulationEqualsTheDeviceRunBitwise) {
  SKIP_WITHOUT_CUDA();
  TempDir dir;
  expect_offload_equals_device_bitwise(dir, offload_run(dir, "cuda", 3, 4, 2), "run");
}

TEST(CudaOffload, Bf16WithTheMastersOnTheHostEqualsTheDeviceRunBitwise) {
  SKIP_WITHOUT_CUDA();
  TempDir dir;
  Config c = offload_run(dir, "cuda", 3, 4, 2);
  c.precision.recipe = "bf16";
  EXPECT_TRUE(expect_offload_equals_device_bitwise(dir, c, "run").masters_on_host);
}

TEST(CudaOffload, Fp8WithTheMastersOnTheHostEqualsTheDeviceRunBitwise) {
  SKIP_WITHOUT_CUDA();
  TempDir dir;
  Config c = offload_run(dir, "cuda", 3, 4, 1);
  c.precision.recipe = "fp8";
  EXPECT_TRUE(expect_offload_equals_device_bitwise(dir, c, "run").masters_on_host);
}

TEST(CudaOffload, ResumeOfAnOffloadedRunEqualsTheUninterruptedRun) {
  SKIP_WITHOUT_CUDA();
  TempDir dir;
  for (const std::string recipe : {"fp32", "bf16"}) {
    SCOPED_TRACE(recipe);
    Config c = offload_run(dir, "cuda", 2, 8, 1);
    c.precision.recipe = recipe;
    c.log.run_dir = dir.file("straight_" + recipe);
    Trainer straight(c, config_to_yaml(c));
    straight.run();
    EXPECT_EQ(weights_after_resume(c, 1, dir.file("resumed_" + recipe)), straight.model().parameters_to_host());
  }
}

}  // namespace
}  // namespace gpt::test
