// Data parallelism on 2 ranks against one rank with the same global batch. The sums over the batch run in
// another order (each rank sums its half, then the halves are added), so the comparisons have tolerances:
// losses to 1e-5 relative and weights to 1e-4 of their largest magnitude after 5 AdamW steps (AdamW
// divides by sqrt(v), which amplifies rounding in the smallest gradients; the measured differences are far
// smaller: see the test output).
#include "dist_run.h"

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

// Masked targets (-1), unevenly spread over the ranks, with accumulation, against one rank whose batch
// holds both ranks' rows (dist_run.h).
TEST(DataParallel, MaskedTargetsWithAccumulationEqualOneBigBatch) {
  SharedDir dir;
  const Config two = dist_run(dir, 3, 2);
  Config one = two;
  one.train.batch_size = world().world_size() * two.train.batch_size;
  expect_masked_targets_like_one_rank(dir, two, one, 5, "mpi", kLossTolerance, kWeightTolerance);
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
