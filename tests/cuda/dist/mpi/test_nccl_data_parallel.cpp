// Data parallelism with train.backend cuda over the NCCL communicator, run by gpt_cuda_dist_tests as 2
// ranks on the CUDA emulator (its NCCL emulated over MPI): the same comparisons as tests/dist/mpi, so the
// GPU path (communication stream, events, buckets, ZeRO-1, bf16 reduction) is held to the host path's
// tolerances. On a machine with GPUs the same sources would run on real NCCL.
#include "backend/cuda_entry.h"
#include "cuda/emu/emu_test_util.h"
#include "dist_run.h"
#include "train/device_records.h"

#include <optional>
#include <string>

namespace gpt::test {
namespace {

constexpr double kLossTolerance = 1e-5;
constexpr double kWeightTolerance = 1e-4;

Config cuda_run(const SharedDir& dir, int batch_size, int accum, int steps = 5) {
  Config c = dist_run(dir, batch_size, accum, steps);
  c.train.backend = "cuda";
  return c;
}

// Masked targets spread unevenly over the ranks, dropout, and K = 2 micro-batches, against one rank
// accumulating K W micro-batches (dist_run.h).
TEST(NcclDataParallel, MaskedTargetsAndDropoutEqualOneRankAccumulating) {
  SharedDir dir;
  Config two = cuda_run(dir, 2, 2);
  two.model.dropout = 0.1;
  Config one = two;
  one.train.grad_accum_steps = two.train.grad_accum_steps * world().world_size();
  expect_masked_targets_like_one_rank(dir, two, one, 4, "nccl", kLossTolerance, kWeightTolerance);
}

// Reductions overlapped with backward (each bucket on the communication stream as soon as it is final)
// and one pass after backward sum the same values in the same order: the runs agree bit for bit.
TEST(NcclDataParallel, OverlapOnAndOffAgreeBitwise) {
  SharedDir dir;
  Config on = cuda_run(dir, 2, 2, 3);
  Config off = on;
  off.dist.overlap = false;
  off.log.run_dir = dir.file("run_off");
  Trainer a(on, config_to_yaml(on), &world());
  a.run();
  Trainer b(off, config_to_yaml(off), &world());
  b.run();
  EXPECT_EQ(a.model().parameters_to_host(), b.model().parameters_to_host());
  // The gradient buckets are in the ledger (communication) and held by rank 0's backend from the start.
  if (world().rank() == 0) expect_device_held_as_planned(on.log.run_dir, 3);
}

// ZeRO-1 on the GPU: reduce-scatter into the shard, AdamW on it, all-gather of the weights, against
// plain data parallelism: bit for bit without clipping, the gradient norm within F32 rounding (dist_run.h).
TEST(NcclDataParallel, ZeroOneEqualsPlainDataParallelism) {
  SharedDir dir;
  expect_zero_like_plain(dir, cuda_run(dir, 2, 1, 4), "nccl");
  // Each rank holds its shard's optimizer state and the buckets the ledger planned for it.
  if (world().rank() == 0) expect_device_held_as_planned(dir.file("run_zero"), 4);
}

// Optimizer offload with ZeRO-1 on the GPU: each rank's shard updated by the host's AdamW (the CPU backend's)
// instead of the device's kernel, which round every operation alike (src/cpu/adamw.cpp), so the run is the
// on-device run bit for bit, losses and weights, with and without accumulation (dist_run.h).
TEST(NcclDataParallel, ZeroOneOffloadedEqualsZeroOneOnTheDeviceBitwise) {
  SharedDir dir;
  expect_zero_offload_equals_zero_on_device_bitwise(dir, cuda_run(dir, 2, 1, 3));
}

// ZeRO-1 checkpoints written from device memory: 2 ranks' shards resume on 2 exactly and on 1 like the
// 2-rank run, and a 1-rank checkpoint on 2 (dist_run.h). 2 + 2 steps, fewer than the MPI test's 3 + 3:
// the emulator's steps are slow, and the moments after 2 steps are not the initial ones either.
TEST(NcclDataParallel, ZeroOneCheckpointResumesOnAnotherNumberOfRanks) {
  SharedDir dir;
  expect_zero_checkpoint_resumes_on_other_rank_counts(dir, cuda_run(dir, 2, 1), 2, "nccl");
}

// dist.reduce_dtype bf16: each rank's gradients are rounded to bf16 (relative error 2^-9) before the sum
// and the sum once more. The losses stay within 1e-3 (measured 5e-4: the test output). The weights have
// no tighter bound than AdamW's: its first updates are about lr x sign(g), and where the ranks' halves of
// a gradient nearly cancel, rounding can flip the sign of the sum, moving that weight by up to 2 lr a step;
// so the tolerance is 4 steps x 2 lr, absolute (measured: about a sixth of it).
TEST(NcclDataParallel, Bf16ReductionWithinItsTolerance) {
  SharedDir dir;
  Config f32 = cuda_run(dir, 2, 1, 4);
  Config bf16 = f32;
  bf16.dist.reduce_dtype = "bf16";
  bf16.log.run_dir = dir.file("run_bf16");
  Trainer a(f32, config_to_yaml(f32), &world());
  a.run();
  Trainer b(bf16, config_to_yaml(bf16), &world());
  EXPECT_EQ(b.data_parallel().bucket(0).dtype, DType::BF16);
  // On 2 ranks a ring all-reduce sends each bucket once: 4 bytes a gradient in f32, 2 in bf16.
  EXPECT_DOUBLE_EQ(a.data_parallel().bytes_sent_per_step(), 4.0 * static_cast<double>(a.model().num_parameters()));
  EXPECT_DOUBLE_EQ(b.data_parallel().bytes_sent_per_step(), a.data_parallel().bytes_sent_per_step() / 2);
  b.run();
  const auto la = logged_losses(f32.log.run_dir), lb = logged_losses(bf16.log.run_dir);
  ASSERT_EQ(la.size(), 4u);
  double worst_loss = 0.0;
  for (const auto& [step, loss] : la) {
    EXPECT_NEAR(lb.at(step), loss, 1e-3 * loss) << "step " << step;
    worst_loss = std::max(worst_loss, std::abs(lb.at(step) - loss) / loss);
  }
  const std::vector<float> pb = b.model().parameters_to_host();
  const std::vector<float> pa = a.model().parameters_to_host();
  double diff = 0.0;
  for (size_t i = 0; i < pa.size(); ++i) diff = std::max(diff, std::abs(static_cast<double>(pb[i]) - pa[i]));
  std::printf("[rank %d] nccl bf16 vs f32 reduction, 4 steps: losses differ by %.2e, weights by at most %.2e\n",
              world().rank(), worst_loss, diff);
  EXPECT_LT(diff, 4 * 2 * f32.optim.lr);
  EXPECT_GT(diff, 0.0) << "a bf16 reduction that changes nothing did not round";
  EXPECT_TRUE(same_on_every_rank(pb));
}

// The FP8 amaxes' max over the ranks, an integer max of NCCL on a device buffer, keeps NaN and +inf,
// which NCCL's float max would drop (dist_run.h).
TEST(NcclDataParallel, MaxOverRanksKeepsNonFiniteValues) {
  SharedDir dir;
  const Config c = cuda_run(dir, 2, 1);
  Trainer trainer(c, config_to_yaml(c), &world());
  ASSERT_EQ(trainer.data_parallel().comm().name(), "nccl");
  expect_max_over_ranks_keeps_nonfinite(trainer.data_parallel());
}

// fp8 with delayed scaling and E5M2 gradients on the GPU: the amaxes are maxed over the ranks by NCCL
// each step, so both ranks cast with the scales one rank accumulating both halves uses (the same checks
// as the MPI test).
TEST(NcclDataParallel, Fp8RanksCastWithTheScalesOfOneRankAccumulating) {
  SharedDir dir;
  expect_fp8_ranks_cast_like_one_rank(dir, cuda_run(dir, 2, 1), 2, 4, "nccl", kLossTolerance, kWeightTolerance);
}

// train.backend auto on a job where one rank's GPU cannot be used (an emulated Tesla V100, 7.0): that rank
// takes the CPU, the other CUDA, and instead of the two waiting in collectives of different communicators
// (NCCL's bootstrap against MPI's all-reduce) both stop, saying which rank took which.
TEST(NcclDataParallel, AutoWithAGpuOnlyOneRankCanUseStopsEveryRankSayingWhichTookWhat) {
  SharedDir dir;
  Config c = cuda_run(dir, 2, 1, 1);
  c.train.backend = "auto";
  std::optional<cuda::test::EmulatedDevice> v100;
  if (world().rank() == 1) v100.emplace(cuda::test::renamed_device("Tesla V100-SXM2-16GB (emulated)", 7, 0));
  const std::string message = error_message([&] { Trainer(c, config_to_yaml(c), &world()); });
  EXPECT_NE(message.find("train.backend auto took CUDA on rank(s) 0 and the CPU on rank(s) 1"), std::string::npos)
      << message;
  EXPECT_NE(message.find("set train.backend: cpu"), std::string::npos) << message;
}

}  // namespace
}  // namespace gpt::test
