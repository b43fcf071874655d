// Optimizer offload over 2 ranks: with ZeRO-1 each rank's host holds only its shard's masters, gradients and
// moments, and the run equals the same run without offload bit for bit (losses and weights), with and without
// accumulation; a checkpoint of the offloaded run resumes exactly.
#include "dist_run.h"

namespace gpt::test {
namespace {

TEST(Offload, ZeroOneOffloadedEqualsZeroOneOnTheDeviceBitwise) {
  SharedDir dir;
  expect_zero_offload_equals_zero_on_device_bitwise(dir, dist_run(dir, 4, 1));
}

TEST(Offload, PlainDataParallelOffloadedEqualsOnTheDeviceAndResumes) {
  SharedDir dir;
  Config plain = dist_run(dir, 4, 1, 6);
  plain.optim.warmup_steps = 10;  // the learning rate of steps 1-3 does not depend on train.steps then
  Config offloaded = plain;
  offloaded.memory.offload = "optimizer";
  offloaded.log.run_dir = dir.file("offload");
  Trainer a(plain, config_to_yaml(plain), &world());
  a.run();
  Trainer b(offloaded, config_to_yaml(offloaded), &world());
  b.run();
  EXPECT_EQ(a.model().parameters_to_host(), b.model().parameters_to_host());

  Config first = offloaded;
  first.train.steps = 3;
  first.log.run_dir = dir.file("resumed");
  { Trainer(first, config_to_yaml(first), &world()).run(); }
  Config second = first;
  second.train.steps = 6;
  second.train.resume = true;
  Trainer resumed(second, config_to_yaml(second), &world());
  EXPECT_EQ(resumed.step(), 3);
  resumed.run();
  EXPECT_EQ(resumed.model().parameters_to_host(), a.model().parameters_to_host());
}

}  // namespace
}  // namespace gpt::test
