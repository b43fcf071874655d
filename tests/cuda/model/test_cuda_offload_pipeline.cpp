// Optimizer offload's pipeline on the CUDA backend (on the emulator in CI, whose streams are worker threads
// of their own, so the copy stream really runs beside the compute stream there):
//   - the transfers' order: a copy to the host reads what the compute stream wrote before it was queued; an
//     op queued after order_after_transfers reads what a copy to the device wrote; a ticket never issued is
//     an error;
//   - the backend pins host memory, and an offloaded run's masters and gradients' copy are in it;
//   - a pipelined offloaded run (accumulation, clipping, dropout) reproduces itself bit for bit, so no copy
//     races a kernel. Against the run with AdamW on the device it is bit for bit too (test_cuda_offload.cpp);
//     pinning refused, it is the pinned run bit for bit (tests/cuda/emu/test_offload_pinned_memory.cpp,
//     which can ask the emulator about memory).
#include "backend/cuda_entry.h"
#include "cuda/model/skip_without_cuda.h"
#include "config/config_loader.h"
#include "test_util.h"
#include "train/synthetic_run.h"
#include "train/trainer.h"

#include <gtest/gtest.h>

#include <vector>

namespace gpt::test {
namespace {

TEST(CudaOffloadPipeline, TransfersFollowTheComputeStreamAndOrderTheOpsAfterThem) {
  SKIP_WITHOUT_CUDA();
  std::unique_ptr<Backend> backend = cuda::make_backend();
  ASSERT_TRUE(backend->capabilities().pinned_host_memory);
  constexpr int64_t n = 1 << 16;
  void* device = backend->allocate(n * 4);
  void* other = backend->allocate(n * 4);
  auto* host = static_cast<float*>(backend->allocate_pinned(n * 4));
  ASSERT_NE(host, nullptr);
  const Tensor a(device, {n}, DType::F32, Device::CUDA), b(other, {n}, DType::F32, Device::CUDA);
  for (int round = 0; round < 3; ++round) {
    const float written = 3.0f + static_cast<float>(round);
    backend->fill({a, written});
    const uint64_t landed = backend->transfer_to_host(host, device, n * 4);
    EXPECT_GT(landed, 0u);
    backend->wait_transfer(landed);
    EXPECT_EQ(std::vector<float>(host, host + n), std::vector<float>(n, written)) << "round " << round;
    for (int64_t i = 0; i < n; ++i) host[i] = -written;
    backend->transfer_to_device(device, host, n * 4);
    backend->order_after_transfers();
    backend->copy({b, a});
    std::vector<float> seen(n);
    backend->copy_to_host(seen.data(), other, n * 4);
    EXPECT_EQ(seen, std::vector<float>(n, -written)) << "round " << round;
  }
  const std::string never = error_message([&] { backend->wait_transfer(1000); });
  EXPECT_NE(never.find("ticket 1000 was never issued"), std::string::npos) << never;
  backend->deallocate_pinned(host);
  backend->deallocate(other);
  backend->deallocate(device);
}

TEST(CudaOffloadPipeline, APipelinedRunIsPinnedAndReproducesItselfBitwise) {
  SKIP_WITHOUT_CUDA();
  TempDir dir;
  Config c = offload_run(dir, "cuda", 3, 4, 2);
  std::vector<FinishedRun> runs;
  for (const char* name : {"first", "second"}) {
    c.log.run_dir = dir.file(name);
    runs.push_back(run_to_end(c));
    EXPECT_TRUE(runs.back().offloaded);
    EXPECT_TRUE(runs.back().pinned);
  }
  ASSERT_EQ(runs[0].losses.size(), 3u);
  EXPECT_EQ(runs[1].losses, runs[0].losses);
  EXPECT_EQ(runs[1].weights, runs[0].weights);
}

}  // namespace
}  // namespace gpt::test
