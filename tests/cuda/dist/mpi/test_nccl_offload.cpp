// Optimizer offload with train.backend cuda over the NCCL communicator, 2 ranks on the CUDA emulator: the
// offload's copy stream meets the communication stream there. With ZeRO-1 the update queues each shard
// range's copy after the reduce-scatter, and the all-gather of the weights must wait for the copies back.
// A run whose host state is pinned (copies asynchronous on the copy stream) equals, bit for bit, the run
// whose pinning was refused (every copy holds the host until it lands): any copy that raced a kernel or a
// collective would break the equality. With the masters on the host, the run equals AdamW on the device.
#include "backend/cuda_entry.h"
#include "dist_run.h"
#include "emu/control.h"

namespace gpt::test {
namespace {

TEST(NcclOffload, ZeroOnePinnedEqualsZeroOneWithPinningRefusedBitwise) {
  SharedDir dir;
  std::vector<std::vector<float>> weights;
  for (const bool pin : {true, false}) {
    Config c = dist_run(dir, 2, 2, 3);
    c.train.backend = "cuda";
    c.dist.zero = 1;
    c.memory.offload = "optimizer";
    c.log.run_dir = dir.file(pin ? "pinned" : "ordinary");
    cuda::emu::fail_pinned_allocations(pin ? 0 : 2);  // the masters and the gradients' copy
    Trainer t(c, config_to_yaml(c), &world());
    cuda::emu::fail_pinned_allocations(0);
    EXPECT_EQ(t.optimizer().host_memory_pinned(), pin);
    t.run();
    weights.push_back(t.model().parameters_to_host());
    EXPECT_TRUE(same_on_every_rank(weights.back()));
  }
  EXPECT_EQ(weights[1], weights[0]);
}

// bf16 with the FP32 masters on each rank's host: the start's broadcast passes the device's staging buffer,
// and ZeRO-1's updated shard crosses into the gradient buckets and the gathered weights back out on the copy
// stream, around NCCL's all-gather on its own; the run equals the one whose AdamW runs on the device bit for bit.
TEST(NcclOffload, HostMastersZeroOneBf16EqualsAdamWOnTheDeviceBitwise) {
  SharedDir dir;
  Config c = dist_run(dir, 2, 2, 3);
  c.train.backend = "cuda";
  c.precision.recipe = "bf16";
  c.dist.zero = 1;
  expect_host_masters_offload_equals_device_bitwise(dir, c, "nccl_bf16_zero");
}

}  // namespace
}  // namespace gpt::test
