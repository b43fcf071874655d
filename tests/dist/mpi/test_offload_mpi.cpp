// Optimizer offload over 2 ranks: in fp32 with ZeRO-1 each rank's host holds only its shard's masters, gradients
// and moments; under a recipe with a compute copy every rank holds all the FP32 masters on its host and the
// device none. Either way the run equals the same run without offload bit for bit (losses and weights), with and
// without accumulation; a checkpoint of the offloaded run resumes exactly.
#include "backend/separate_host_memory_backend.h"
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

// The start's broadcast of host masters, on a backend whose device memory is not the host's: through the
// device's compute copy a piece at a time (the BF16 copy is half the FP32 masters' bytes, so they take
// several pieces): every rank ends with rank 0's values, which differed from its own in every element, and
// the next forward casts the copy again. On the CPU itself the masters are broadcast where they are.
TEST(Offload, HostMastersBroadcastGivesEveryRankRankZerosBits) {
  std::unique_ptr<Backend> cpu = make_backend(BackendKind::Cpu, {1});
  SeparateHostMemoryBackend device(*cpu);
  PrecisionConfig bf16;
  bf16.recipe = "bf16";
  const ModelConfig config = tiny_model(16, 2, 32, 2, 16);
  RecomputePolicy none;
  none.layers = config.n_layer;
  GPT model(config, 1, 16, device, DType::F32, none, precision_recipe(bf16), {}, cpu.get());
  ASSERT_TRUE(model.masters_on_host());
  ASSERT_GT(model.parameter_arena().layout().total_bytes(), model.compute_weight_arena()->layout().total_bytes());
  auto values_of = [&](int rank) {
    std::mt19937 rng(100 + static_cast<uint32_t>(rank));
    std::vector<float> v(static_cast<size_t>(model.num_parameters()));
    // Magnitudes in [0.5, 1.5) on rank 0 and [2, 3) elsewhere: no element of another rank is rank 0's.
    const float low = rank == 0 ? 0.5f : 2.0f;
    for (float& x : v) x = std::uniform_real_distribution<float>(low, low + 1.0f)(rng) * (rng() % 2 ? 1.0f : -1.0f);
    return v;
  };
  const std::vector<float> root = values_of(0), own = values_of(world().rank());
  model.parameters_from_host(own);
  DataParallel dp(model, world(), 0);
  dp.broadcast_parameters();
  EXPECT_EQ(model.parameters_to_host(), root);
}

TEST(Offload, HostMastersPlainDataParallelBf16EqualsOnTheDeviceBitwise) {
  SharedDir dir;
  Config c = dist_run(dir, 2, 2);
  c.precision.recipe = "bf16";
  expect_host_masters_offload_equals_device_bitwise(dir, c, "bf16_plain_k2");
}

TEST(Offload, HostMastersZeroOneBf16EqualsOnTheDeviceBitwise) {
  SharedDir dir;
  for (const int accum : {1, 2}) {
    Config c = dist_run(dir, 4 / accum, accum);
    c.precision.recipe = "bf16";
    c.dist.zero = 1;
    expect_host_masters_offload_equals_device_bitwise(dir, c, "bf16_zero_k" + std::to_string(accum));
  }
}

TEST(Offload, HostMastersZeroOneFp16AndFp8EqualOnTheDeviceBitwise) {
  SharedDir dir;
  for (const char* recipe : {"fp16", "fp8"}) {
    Config c = dist_run(dir, 4, 1);
    c.precision.recipe = recipe;
    c.dist.zero = 1;
    expect_host_masters_offload_equals_device_bitwise(dir, c, std::string(recipe) + "_zero");
  }
}

// A checkpoint of a ZeRO-1 run with host masters (the masters from the host, each rank's moments its shard's)
// continues bit for bit as the run that was not stopped.
TEST(Offload, HostMastersZeroOneResumesBitwise) {
  SharedDir dir;
  Config straight = dist_run(dir, 4, 1, 6);
  straight.precision.recipe = "bf16";
  straight.dist.zero = 1;
  straight.memory.offload = "optimizer";
  straight.optim.warmup_steps = 10;  // the learning rate of steps 1-3 does not depend on train.steps then
  Trainer a(straight, config_to_yaml(straight), &world());
  ASSERT_TRUE(a.model().masters_on_host());
  a.run();

  Config first = straight;
  first.train.steps = 3;
  first.log.run_dir = dir.file("resumed");
  { Trainer(first, config_to_yaml(first), &world()).run(); }
  Config second = first;
  second.train.steps = 6;
  second.train.resume = true;
  Trainer resumed(second, config_to_yaml(second), &world());
  EXPECT_EQ(resumed.step(), 3);
  resumed.run();
  const std::vector<float> weights = resumed.model().parameters_to_host();
  EXPECT_EQ(weights, a.model().parameters_to_host());
  EXPECT_TRUE(same_on_every_rank(weights));
}

}  // namespace
}  // namespace gpt::test
