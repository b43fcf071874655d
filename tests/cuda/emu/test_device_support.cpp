// A GPU this build cannot use is said at start, with what to do, instead of failing inside the first op:
// the rule (backend/device_support.h) on its own, then backend selection and the fp8 recipe on emulated
// devices of other generations (emu::configure_device): a Tesla V100 (7.0, older than CUDA 13's oldest
// target, 7.5), a Tesla T4 (7.5: runs where the build holds sm_75), a device the binary holds no code for,
// an RTX 3090 (8.6, no FP8 tensor cores) and a Blackwell card (12.0); and the FP8 products' widths.
#include "backend/cuda_entry.h"
#include "backend/device_support.h"
#include "emu/control.h"
#include "common/launch.cuh"
#include "cuda/emu/emu_test_util.h"
#include "train/synthetic_run.h"

#include <gtest/gtest.h>

namespace gpt::test {
namespace {

using cuda::DeviceSupport;
using Code = DeviceSupport::Code;

using cuda::test::EmulatedDevice;
using cuda::test::renamed_device;

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(DeviceSupport, MachineCodeRunsOnLaterMinorsOfItsMajor) {
  EXPECT_EQ(cuda::device_support(86, "80;86;89;90").code, Code::Native);
  EXPECT_EQ(cuda::device_support(89, "80;90").code, Code::Native);        // sm_80's code on an RTX 4090
  EXPECT_EQ(cuda::device_support(87, "80-real,90-real").code, Code::Native);
  EXPECT_EQ(cuda::device_support(90, "90a-real").code, Code::Native);
  EXPECT_EQ(cuda::device_support(90, " 80 ; 90 ").code, Code::Native);     // spaces as a user may write them
  EXPECT_EQ(cuda::device_support(75, "75;80;86;89;90").code, Code::Native);  // a T4 on the release default
}

TEST(DeviceSupport, ANewerGpuRunsThePtxCompiledAtFirstUseAndIsToldHowToBuildForIt) {
  const DeviceSupport blackwell = cuda::device_support(120, "80;86;89;90");
  EXPECT_EQ(blackwell.code, Code::CompiledAtFirstUse);
  EXPECT_TRUE(blackwell.runs());
  EXPECT_TRUE(contains(blackwell.detail, "compute capability 12.0")) << blackwell.detail;
  EXPECT_TRUE(contains(blackwell.detail, "compute_90 PTX")) << blackwell.detail;  // the newest that runs
  EXPECT_TRUE(contains(blackwell.detail, "-DCMAKE_CUDA_ARCHITECTURES=120")) << blackwell.detail;
  EXPECT_EQ(cuda::device_support(86, "80-virtual").code, Code::CompiledAtFirstUse);
}

TEST(DeviceSupport, ABuildWithoutCodeForTheDeviceSaysWhichArchitecturesItHasAndHowToRebuild) {
  // SASS alone never runs on another major; PTX never on an older device; "a" code only on its own.
  for (const auto& [cc, list] :
       {std::pair{100, "80-real,90-real"}, std::pair{86, "90"}, std::pair{100, "90a"}, std::pair{75, "80;90"}}) {
    const DeviceSupport s = cuda::device_support(cc, list);
    EXPECT_EQ(s.code, Code::Unsupported) << cc << " " << list;
    EXPECT_TRUE(contains(s.detail, "none of whose code runs on compute capability " +
                                       cuda::compute_capability_text(cc)))
        << s.detail;
    EXPECT_TRUE(contains(s.detail, "scripts/build.sh -DCMAKE_CUDA_ARCHITECTURES=" + std::to_string(cc))) << s.detail;
  }
  EXPECT_TRUE(contains(cuda::device_support(100, "80-real,90-real").detail, "architectures 80-real;90-real"));
  EXPECT_TRUE(contains(cuda::device_support(86, "").detail, "architectures (none)"));
}

TEST(DeviceSupport, GpusOlderThanTuringAreRefusedWhateverTheBuild) {
  for (int cc : {70, 61, 52}) {
    const DeviceSupport s = cuda::device_support(cc, "75;80;86;89;90");
    EXPECT_EQ(s.code, Code::Unsupported);
    EXPECT_TRUE(contains(s.detail, "needs compute capability 7.5 or later")) << s.detail;
    EXPECT_TRUE(contains(s.detail, "train.backend: cpu")) << s.detail;
  }
  EXPECT_EQ(cuda::device_support(70, "native").code, Code::Unsupported);
}

TEST(DeviceSupport, ATuringGpuIsToldWhatRunsSlowlyThereAndAnAmpereOneIsNot) {
  cuda::DeviceCheck t4{0, "Tesla T4", 75, {}};
  const std::string limits = t4.limits();
  EXPECT_TRUE(contains(limits, "device 0 (Tesla T4, compute capability 7.5) is older than Ampere")) << limits;
  EXPECT_TRUE(contains(limits, "precision.recipe: fp16 runs its products there")) << limits;
  EXPECT_TRUE(contains(limits, "FP32-arithmetic kernels")) << limits;
  EXPECT_EQ((cuda::DeviceCheck{0, "NVIDIA GeForce RTX 3060", 86, {}}.limits()), "");
  EXPECT_EQ((cuda::DeviceCheck{0, "NVIDIA A100", 80, {}}.limits()), "");
}

TEST(DeviceSupport, ListsThatDependOnTheBuildMachineLeaveItToTheDriver) {
  EXPECT_EQ(cuda::device_support(86, "native").code, Code::Unknown);
  EXPECT_EQ(cuda::device_support(120, "all-major").code, Code::Unknown);
  EXPECT_EQ(cuda::device_support(86, "90;native").code, Code::Unknown);
  EXPECT_FALSE(cuda::built_architectures().empty());
}

TEST(DeviceSupport, AVoltaGpuStopsTrainBackendCudaAndAutoTrainsOnTheCpu) {
  const EmulatedDevice v100(renamed_device("Tesla V100-SXM2-16GB (emulated)", 7, 0));
  const std::string message = error_message([] { cuda::make_backend(); });
  EXPECT_TRUE(contains(message, "device 0 (Tesla V100-SXM2-16GB (emulated), compute capability 7.0) cannot run the "
                                "CUDA backend"))
      << message;
  EXPECT_TRUE(contains(message, "needs compute capability 7.5 or later")) << message;
  EXPECT_TRUE(contains(message, "train.backend: cpu trains without it")) << message;
  EXPECT_EQ(make_backend(BackendKind::Auto)->name(), "cpu");
  EXPECT_TRUE(contains(cuda::unusable_device_reason(), "compute capability 7.0"));
  EXPECT_TRUE(contains(cuda::describe(), "the CUDA backend cannot run on it")) << cuda::describe();
}

// A T4 runs a build that holds sm_75 (the release default) and is told to rebuild by one that does not
// (CI's 80;90): which, this binary's list decides; test_turing_training.cpp trains on it either way.
TEST(DeviceSupport, ATuringGpuRunsWhereTheBuildHoldsSm75AndIsToldToRebuildWhereNot) {
  const EmulatedDevice t4(cuda::test::tesla_t4());
  if (cuda::device_support(75, cuda::built_architectures()).runs()) {
    const auto backend = cuda::make_backend();
    EXPECT_EQ(backend->name(), "cuda");
    EXPECT_TRUE(contains(backend->capabilities().fp8_products_unavailable, "compute capability 7.5"));
    EXPECT_EQ(cuda::unusable_device_reason(), "");
    EXPECT_TRUE(contains(cuda::check_device(0).limits(), "older than Ampere"));
  } else {
    const std::string message = error_message([] { cuda::make_backend(); });
    EXPECT_TRUE(contains(message, "none of whose code runs on compute capability 7.5")) << message;
    EXPECT_TRUE(contains(message, "-DCMAKE_CUDA_ARCHITECTURES=75")) << message;
    EXPECT_EQ(make_backend(BackendKind::Auto)->name(), "cpu");
  }
}

TEST(DeviceSupport, ADeviceTheBinaryHoldsNoCodeForIsFoundByTheDriversProbe) {
  // Compute capability 9.0 passes the rule for any build that has sm_90 or compute_80/90; the driver's
  // answer (cudaFuncGetAttributes: no kernel image) is what stops it.
  const EmulatedDevice imageless(renamed_device("NVIDIA H100 without our code (emulated)", 9, 0, /*kernel_images=*/false));
  const std::string message = error_message([] { cuda::make_backend(); });
  EXPECT_TRUE(contains(message, "holds no code that runs on it")) << message;
  EXPECT_TRUE(contains(message, "no kernel image is available")) << message;
  EXPECT_TRUE(contains(message, "-DCMAKE_CUDA_ARCHITECTURES=90")) << message;
  EXPECT_EQ(make_backend(BackendKind::Auto)->name(), "cpu");
  // The probe's failure is not left behind as the thread's last error.
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

TEST(DeviceSupport, AnAmpereGpuRefusesTheFp8RecipeAtStartAndTrainsBf16) {
  const EmulatedDevice rtx3090(renamed_device("NVIDIA GeForce RTX 3090 (emulated)", 8, 6));
  auto backend = cuda::make_backend();
  EXPECT_TRUE(contains(backend->capabilities().fp8_products_unavailable,
                       "device 0 (NVIDIA GeForce RTX 3090 (emulated), compute capability 8.6) has no FP8 tensor cores"));
  TempDir dir;
  Config c = synthetic_run(dir, cycle_pattern(), 4000, false);
  c.train.backend = "cuda";
  c.train.steps = 1;
  c.precision.recipe = "fp8";
  const std::string message = error_message([&] { Trainer(c, config_to_yaml(c)); });
  EXPECT_TRUE(contains(message, "the fp8 recipe multiplies in FP8, and device 0")) << message;
  EXPECT_TRUE(contains(message, "need compute capability 8.9 or later")) << message;
  EXPECT_TRUE(contains(message, "precision.recipe: bf16 runs there")) << message;
  // The first and last block kept in BF16 (both of the two) leave no FP8 product to refuse.
  c.precision.fp8_bf16_layers = 1;
  c.log.run_dir = dir.file("all_bf16_layers");
  EXPECT_EQ(Trainer(c, config_to_yaml(c)).run().status, TrainStatus::Completed);
  c.precision.recipe = "bf16";
  c.precision.fp8_bf16_layers = 0;
  c.log.run_dir = dir.file("bf16");
  EXPECT_EQ(Trainer(c, config_to_yaml(c)).run().status, TrainStatus::Completed);
}

TEST(DeviceSupport, HopperMultipliesFp8) {
  EXPECT_EQ(cuda::make_backend()->capabilities().fp8_products_unavailable, "");
}

// cuBLASLt's FP8 products take widths in multiples of 16: an fp8 run of n_embd 40 stops at start, naming
// the key and the widths that work, where the CPU trains it; with every block kept in BF16 it trains.
TEST(DeviceSupport, TheFp8RecipeRefusesAWidthOffTheMultiplesOf16AtStart) {
  TempDir dir;
  Config c = synthetic_run(dir, cycle_pattern(), 4000, false);
  c.model = tiny_model(16, 2, 40, 2, 16);
  c.train.backend = "cuda";
  c.train.steps = 1;
  c.precision.recipe = "fp8";
  const std::string message = error_message([&] { Trainer(c, config_to_yaml(c)); });
  EXPECT_TRUE(contains(message, "which this backend takes in multiples of 16 only, and model.n_embd is 40: use n_embd "
                                "32 or 48, or precision.recipe: bf16"))
      << message;
  c.precision.fp8_bf16_layers = 1;
  c.log.run_dir = dir.file("all_bf16_layers");
  EXPECT_EQ(Trainer(c, config_to_yaml(c)).run().status, TrainStatus::Completed);
  c.precision.fp8_bf16_layers = 0;
  c.train.backend = "cpu";
  c.log.run_dir = dir.file("cpu");
  EXPECT_EQ(Trainer(c, config_to_yaml(c)).run().status, TrainStatus::Completed);
}

TEST(DeviceSupport, ABlackwellGpuTrainsOnThePtxOfTheBuild) {
  const EmulatedDevice blackwell(renamed_device("NVIDIA GeForce RTX 5090 (emulated)", 12, 0));
  // Whether it runs from PTX or machine code depends on the build's list; either way it runs.
  EXPECT_TRUE(cuda::device_support(120, cuda::built_architectures()).runs());
  EXPECT_EQ(cuda::unusable_device_reason(), "");
  EXPECT_EQ(make_backend(BackendKind::Auto)->name(), "cuda");
}

__global__ void mark_threads(int* out) { out[threadIdx.x] = 1; }

TEST(EmuKernelImages, ADeviceWithoutCodeFailsEveryLaunchWithNoKernelImage) {
  const EmulatedDevice imageless(renamed_device("imageless (emulated)", 9, 0, /*kernel_images=*/false));
  cudaFuncAttributes attributes{};
  EXPECT_EQ(cudaFuncGetAttributes(&attributes, mark_threads), cudaErrorNoKernelImageForDevice);
  EXPECT_EQ(cudaGetLastError(), cudaErrorNoKernelImageForDevice);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);  // not sticky, as CUDA's
  int* out = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&out), 32 * sizeof(int)), cudaSuccess);
  const std::string message = error_message([&] { cuda::launch<mark_threads>(dim3(1), dim3(32), 0, nullptr, out); });
  EXPECT_TRUE(contains(message, "no kernel image is available for execution on the device")) << message;
  EXPECT_EQ(cudaFree(out), cudaSuccess);
}

}  // namespace
}  // namespace gpt::test
