// Data parallelism with train.backend cuda over the NCCL communicator, run by gpt_cuda_dist_tests as 2
// ranks on the CUDA emulator (its NCCL emulated over MPI): the same comparisons as tests/dist/mpi, so the
// GPU path (communication stream, events, buckets, ZeRO-1, bf16 reduction) is held to the host path's
// tolerances. On a machine with GPUs the same sources would run on real NCCL.
#include "backend/cuda_entry.h"
#include "dist/data_parallel.h"
#include "dist_run.h"

#include <random>

namespace gpt::test {
namespace {

constexpr double kLossTolerance = 1e-5;
constexpr double kWeightTolerance = 1e-4;

Config cuda_run(const SharedDir& dir, int batch_size, int accum, int steps = 5) {
  Config c = dist_run(dir, batch_size, accum, steps);
  c.train.backend = "cuda";
  return c;
}

// Masked targets spread unevenly over the ranks, dropout, and K = 2 micro-batches: rank r's micro-batch
// k is micro-batch kW + r of one rank accumulating KW micro-batches (rows, dropout masks and all), and
// the loss is normalised by the step's target tokens on all ranks.
TEST(NcclDataParallel, MaskedTargetsAndDropoutEqualOneRankAccumulating) {
  SharedDir dir;
  const int B = 2, T = 16, K = 2, W = world().world_size(), r = world().rank();
  Config two = cuda_run(dir, B, K);
  two.model.dropout = 0.1;
  Config one = two;
  one.train.grad_accum_steps = K * W;
  one.log.run_dir = dir.file("one_rank" + std::to_string(r));
  Trainer dp(two, config_to_yaml(two), &world());
  ASSERT_EQ(dp.data_parallel().comm().name(), "nccl");
  Trainer ref(one, config_to_yaml(one));

  std::mt19937 rng(42);  // the same stream on every rank
  for (int step = 0; step < 4; ++step) {
    std::vector<int32_t> all_in(static_cast<size_t>(K) * W * B * T), all_tg(all_in.size());
    for (size_t i = 0; i < all_in.size(); ++i) {
      const size_t row = i / T % (static_cast<size_t>(W) * B);
      const double masked = row < static_cast<size_t>(B) ? 0.1 : 0.8;  // rank 0's rows mostly kept
      all_in[i] = static_cast<int32_t>(rng() % 16);
      all_tg[i] = std::uniform_real_distribution<double>(0, 1)(rng) < masked ? -1 : static_cast<int32_t>(rng() % 16);
    }
    std::vector<int32_t> in, tg;
    for (int k = 0; k < K; ++k) {
      const size_t begin = (static_cast<size_t>(k) * W * B + static_cast<size_t>(r) * B) * T;
      in.insert(in.end(), all_in.begin() + begin, all_in.begin() + begin + B * T);
      tg.insert(tg.end(), all_tg.begin() + begin, all_tg.begin() + begin + B * T);
    }
    const StepResult a = dp.train_step(in, tg);
    const StepResult b = ref.train_step(all_in, all_tg);
    EXPECT_EQ(a.target_tokens, b.target_tokens);
    EXPECT_NEAR(a.loss, b.loss, kLossTolerance * b.loss) << "step " << step;
    EXPECT_NEAR(a.grad_norm, b.grad_norm, 1e-4 * b.grad_norm) << "step " << step;
  }
  const std::vector<float> p = dp.model().parameters_to_host();
  const double diff = relative_difference(p, ref.model().parameters_to_host());
  std::printf("[rank %d] nccl, masked targets + dropout, 2 ranks x K=2 vs 1 rank x K=4: weights differ by %.2e of "
              "their largest\n", r, diff);
  EXPECT_LT(diff, kWeightTolerance);
  EXPECT_TRUE(same_on_every_rank(p)) << "the ranks' weights drifted apart";
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
}

// ZeRO-1 on the GPU: reduce-scatter into the shard, AdamW on it, all-gather of the weights. The sums are
// those of the all-reduce; only the gradient norm (used by clipping) is summed per shard, as on the host.
TEST(NcclDataParallel, ZeroOneEqualsPlainDataParallelism) {
  SharedDir dir;
  Config plain = cuda_run(dir, 2, 1, 4);
  Config zero = plain;
  zero.dist.zero = 1;
  zero.log.run_dir = dir.file("run_zero");
  Trainer a(plain, config_to_yaml(plain), &world());
  a.run();
  Trainer b(zero, config_to_yaml(zero), &world());
  EXPECT_EQ(b.data_parallel().zero_stage(), 1);
  EXPECT_LT(b.optimizer().state_bytes(), a.optimizer().state_bytes() * 0.6);
  b.run();
  const auto la = logged_losses(plain.log.run_dir), lb = logged_losses(zero.log.run_dir);
  ASSERT_EQ(la.size(), 4u);
  for (const auto& [step, loss] : la) EXPECT_NEAR(lb.at(step), loss, 1e-6 * loss) << "step " << step;
  const std::vector<float> pb = b.model().parameters_to_host();
  const double diff = relative_difference(pb, a.model().parameters_to_host());
  std::printf("[rank %d] nccl ZeRO-1 vs plain, 4 steps: weights differ by %.2e of their largest\n", world().rank(), diff);
  EXPECT_LT(diff, 1e-5);
  EXPECT_TRUE(same_on_every_rank(pb));
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

}  // namespace
}  // namespace gpt::test
