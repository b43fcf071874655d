// ZeRO-1: the sharded optimizer trains like plain data parallelism, halves each rank's AdamW state, and
// its checkpoints (one optimizer shard per rank) resume on another number of ranks.
#include "dist_run.h"
#include "io/checkpoint.h"
#include "io/optimizer_shards.h"

#include <filesystem>

namespace fs = std::filesystem;

namespace gpt::test {
namespace {

// The reduce-scatter sums the same two halves an all-reduce sums, and AdamW is elementwise, so ZeRO-1
// differs from plain data parallelism only in the gradient norm: per-rank partial sums of squares, added
// in double, against one sum over the whole arena. Clipping (active here) turns that last-bit difference
// into a relative difference of the update of about 1e-7.
TEST(Zero, EqualsPlainDataParallelism) {
  SharedDir dir;
  Config plain = dist_run(dir, 4, 2);
  Config zero = plain;
  zero.dist.zero = 1;
  zero.log.run_dir = dir.file("run_zero");
  Trainer a(plain, config_to_yaml(plain), &world());
  a.run();
  Trainer b(zero, config_to_yaml(zero), &world());
  EXPECT_EQ(b.data_parallel().zero_stage(), 1);
  EXPECT_LT(b.optimizer().num_elements(), a.optimizer().num_elements() / 2 + 64 * (plain.model.n_layer + 1));
  EXPECT_LT(b.optimizer().state_bytes(), a.optimizer().state_bytes() * 0.6);
  b.run();
  const auto la = logged_losses(plain.log.run_dir), lb = logged_losses(zero.log.run_dir);
  ASSERT_EQ(la.size(), 5u);
  for (const auto& [step, loss] : la) EXPECT_NEAR(lb.at(step), loss, 1e-6 * loss) << "step " << step;
  const std::vector<float> pb = b.model().parameters_to_host();
  const double diff = relative_difference(pb, a.model().parameters_to_host());
  std::printf("[rank %d] ZeRO-1 vs plain, 5 steps: weights differ by %.2e of their largest\n", world().rank(), diff);
  EXPECT_LT(diff, 1e-5);
  EXPECT_TRUE(same_on_every_rank(pb));
}

// Without clipping the gradient norm is not used, and ZeRO-1 is plain data parallelism bit for bit.
TEST(Zero, WithoutClippingBitwiseEqualsPlain) {
  SharedDir dir;
  Config plain = dist_run(dir, 4, 1);
  plain.optim.grad_clip = 0.0;
  Config zero = plain;
  zero.dist.zero = 1;
  zero.log.run_dir = dir.file("run_zero");
  Trainer a(plain, config_to_yaml(plain), &world());
  a.run();
  Trainer b(zero, config_to_yaml(zero), &world());
  b.run();
  EXPECT_EQ(a.model().parameters_to_host(), b.model().parameters_to_host());
}

// 3 steps on 2 ranks with ZeRO-1 write a checkpoint of two optimizer shards. Resumed on 2 ranks it
// continues bit for bit; resumed on 1 rank (with the same global batch) it continues like the 2-rank run
// within the data-parallel tolerance. And a 1-rank checkpoint (optimizer.bin) resumes under ZeRO-1.
TEST(Zero, CheckpointResumesOnAnotherNumberOfRanks) {
  SharedDir dir;
  const int r = world().rank();
  Config c = dist_run(dir, 4, 1, 3);
  c.dist.zero = 1;
  c.model.dropout = 0.1;
  c.optim.warmup_steps = 10;  // the learning rate of steps 1-3 does not depend on train.steps then
  { Trainer first(c, config_to_yaml(c), &world()); first.run(); }
  const std::string ckpt = checkpoint_dir(c.log.run_dir, 3);
  if (r == 0) {
    EXPECT_TRUE(fs::exists(fs::path(ckpt) / optimizer_shard_name(0, 2)));
    EXPECT_TRUE(fs::exists(fs::path(ckpt) / optimizer_shard_name(1, 2)));
    EXPECT_FALSE(fs::exists(fs::path(ckpt) / "optimizer.bin"));
    EXPECT_TRUE(verify_checkpoint(ckpt).empty());
    fs::copy(c.log.run_dir, dir.file("run_for_one"), fs::copy_options::recursive);
  }
  world().barrier();

  Config straight = c;
  straight.train.steps = 6;
  straight.log.run_dir = dir.file("straight");
  Trainer s(straight, config_to_yaml(straight), &world());
  s.run();
  const std::vector<float> expected = s.model().parameters_to_host();

  Config resumed = straight;
  resumed.log.run_dir = c.log.run_dir;
  resumed.train.resume = true;
  Trainer two(resumed, config_to_yaml(resumed), &world());
  EXPECT_EQ(two.step(), 3);
  two.run();
  EXPECT_EQ(two.model().parameters_to_host(), expected) << "a 2-rank ZeRO-1 resume is not exact";

  if (r == 0) {
    // Rank 0 alone: twice the micro-batch, the global batch unchanged; dropout masks as 2 accumulated halves.
    Config one = resumed;
    one.log.run_dir = dir.file("run_for_one");
    one.train.grad_accum_steps = 2;
    Trainer single(one, config_to_yaml(one));
    EXPECT_EQ(single.step(), 3);
    single.run();
    const double diff = relative_difference(single.model().parameters_to_host(), expected);
    std::printf("ZeRO-1 checkpoint of 2 ranks resumed on 1: weights after 6 steps differ by %.2e of their largest\n",
                diff);
    EXPECT_LT(diff, 1e-4);

    Config whole = c;
    whole.dist.zero = 0;
    whole.train.grad_accum_steps = 2;
    whole.log.run_dir = dir.file("single_first");
    Trainer w(whole, config_to_yaml(whole));
    w.run();
  }
  world().barrier();
  // The 1-rank checkpoint (optimizer.bin) continued on 2 ranks with ZeRO-1.
  Config from_one = straight;
  from_one.log.run_dir = dir.file("single_first");
  from_one.train.resume = true;
  Trainer z(from_one, config_to_yaml(from_one), &world());
  EXPECT_EQ(z.step(), 3);
  z.run();
  EXPECT_LT(relative_difference(z.model().parameters_to_host(), expected), 1e-4);
}

}  // namespace
}  // namespace gpt::test
