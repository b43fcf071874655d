// Data parallelism on 2 ranks against one rank with the same global batch. The sums over the batch run in
// another order (each rank sums its half, then the halves are added), so the comparisons have tolerances:
// losses to 1e-5 relative and weights to 1e-4 of their largest magnitude after 5 AdamW steps (AdamW
// divides by sqrt(v), which amplifies rounding in the smallest gradients; the measured differences are far
// smaller: see the test output).
#include "dist_run.h"
#include "dist/data_parallel.h"

#include <random>

namespace gpt::test {
namespace {

constexpr double kLossTolerance = 1e-5;
constexpr double kWeightTolerance = 1e-4;

TEST(DataParallel, TwoRanksEqualOneRankWithTwiceTheBatch) {
  SharedDir dir;
  Config two = dist_run(dir, 4, 1);
  Config one = two;
  one.train.batch_size = 8;
  one.log.run_dir = dir.file("one_rank" + std::to_string(world().rank()));
  Trainer dp(two, config_to_yaml(two), &world());
  dp.run();
  Trainer ref(one, config_to_yaml(one));
  ref.run();

  const auto dp_losses = logged_losses(two.log.run_dir), ref_losses = logged_losses(one.log.run_dir);
  ASSERT_EQ(dp_losses.size(), 5u);
  ASSERT_EQ(ref_losses.size(), 5u);
  for (const auto& [step, loss] : ref_losses)
    EXPECT_NEAR(dp_losses.at(step), loss, kLossTolerance * loss) << "step " << step;
  const std::vector<float> p = dp.model().parameters_to_host();
  const double diff = relative_difference(p, ref.model().parameters_to_host());
  std::printf("[rank %d] 2 ranks x B=4 vs 1 rank x B=8, 5 steps: weights differ by %.2e of their largest\n",
              world().rank(), diff);
  EXPECT_LT(diff, kWeightTolerance);
  EXPECT_TRUE(same_on_every_rank(p)) << "the ranks' weights drifted apart";
}

// Masked targets (-1), unevenly spread over the ranks, with accumulation: the loss is normalised by the
// target tokens of the whole step on all ranks, so rank 1's mostly masked half weighs what it would in one
// big batch. Rank r's micro-batch k is rows [rB, (r+1)B) of the reference's micro-batch k.
TEST(DataParallel, MaskedTargetsWithAccumulationEqualOneBigBatch) {
  SharedDir dir;
  const int B = 3, T = 16, K = 2, W = world().world_size(), r = world().rank();
  Config two = dist_run(dir, B, K);
  Config one = two;
  one.train.batch_size = W * B;
  one.log.run_dir = dir.file("one_rank" + std::to_string(r));
  Trainer dp(two, config_to_yaml(two), &world());
  Trainer ref(one, config_to_yaml(one));

  std::mt19937 rng(42);  // the same stream on every rank
  for (int step = 0; step < 5; ++step) {
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
  const double diff = relative_difference(dp.model().parameters_to_host(), ref.model().parameters_to_host());
  std::printf("[rank %d] masked targets, K=2: weights differ by %.2e of their largest\n", r, diff);
  EXPECT_LT(diff, kWeightTolerance);
}

// Dropout: rank r's micro-batch k draws the masks of micro-batch kW + r of a single rank accumulating KW
// micro-batches, which holds the same samples; so the runs agree with dropout on.
TEST(DataParallel, WithDropoutTwoRanksEqualOneRankAccumulating) {
  SharedDir dir;
  Config two = dist_run(dir, 4, 1);
  two.model.dropout = 0.1;
  Config one = two;
  one.train.grad_accum_steps = 2;
  one.log.run_dir = dir.file("one_rank" + std::to_string(world().rank()));
  Trainer dp(two, config_to_yaml(two), &world());
  dp.run();
  Trainer ref(one, config_to_yaml(one));
  ref.run();
  const auto dp_losses = logged_losses(two.log.run_dir), ref_losses = logged_losses(one.log.run_dir);
  for (const auto& [step, loss] : ref_losses)
    EXPECT_NEAR(dp_losses.at(step), loss, kLossTolerance * loss) << "step " << step;
  EXPECT_LT(relative_difference(dp.model().parameters_to_host(), ref.model().parameters_to_host()), kWeightTolerance);
}

// fp8 over MPI: both ranks cast with the scales of one rank accumulating both halves (dist_run.h).
TEST(DataParallel, Fp8TwoRanksCastWithTheScalesOfOneRankAccumulating) {
  SharedDir dir;
  expect_fp8_ranks_cast_like_one_rank(dir, dist_run(dir, 4, 1), 4, 5, "mpi", kLossTolerance, kWeightTolerance);
}

// The FP8 amaxes' max over the ranks keeps NaN and +inf (dist_run.h).
TEST(DataParallel, MaxOverRanksKeepsNonFiniteValues) {
  SharedDir dir;
  const Config c = dist_run(dir, 2, 1);
  Trainer trainer(c, config_to_yaml(c), &world());
  expect_max_over_ranks_keeps_nonfinite(trainer.data_parallel());
}

// K = 3 micro-batches: each gradient bucket is reduced exactly once per optimizer step (during the last
// micro-batch's backward), with and without the overlap.
TEST(DataParallel, OneReductionPerBucketPerStep) {
  for (const bool overlap : {true, false}) {
    SharedDir dir;
    Config c = dist_run(dir, 2, 3, 4);
    c.dist.overlap = overlap;
    CountingCommunicator counting(world());
    Trainer trainer(c, config_to_yaml(c), &counting);
    counting.reductions.clear();  // startup (the rank table) is not a step
    trainer.run();
    DataParallel& dp = trainer.data_parallel();
    ASSERT_EQ(dp.num_buckets(), c.model.n_layer + 1);
    int bucket_reductions = 0, other = 0;
    for (int i = 0; i < dp.num_buckets(); ++i) {
      EXPECT_EQ(counting.reductions[dp.bucket(i).data], 4) << "bucket " << i << " (overlap " << overlap << ")";
      bucket_reductions += counting.reductions[dp.bucket(i).data];
    }
    for (const auto& [ptr, n] : counting.reductions) other += n;
    other -= bucket_reductions;
    if (world().rank() == 0)
      std::printf("overlap %d: 4 steps of K=3: %d bucket reductions (%d buckets x 4), %d scalar ones (token count, "
                  "loss, stop flag, final-checkpoint decision)\n",
                  overlap, bucket_reductions, dp.num_buckets(), other);
  }
}

// MPI cannot sum bf16: dist.reduce_dtype bf16 on the CPU backend stops at start, on every rank alike,
// saying what would work.
TEST(DataParallel, Bf16ReductionOverMpiIsRefusedAtStart) {
  SharedDir dir;
  Config c = dist_run(dir, 2, 1);
  c.dist.reduce_dtype = "bf16";
  try {
    Trainer trainer(c, config_to_yaml(c), &world());
    ADD_FAILURE() << "a bf16 reduction over MPI was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("dist.reduce_dtype bf16: the mpi communicator does not sum bf16 values; use "
                                         "fp32 (bf16 sums need NCCL: train.backend cuda)"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace gpt::test
