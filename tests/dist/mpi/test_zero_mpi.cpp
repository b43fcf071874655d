// ZeRO-1: the sharded optimizer trains like plain data parallelism, halves each rank's AdamW state, and
// its checkpoints (one optimizer shard per rank) resume on another number of ranks.
#include "dist_run.h"

namespace gpt::test {
namespace {

// ZeRO-1 trains like plain data parallelism, bit for bit without clipping, its gradient norm within F32
// rounding (dist_run.h), with K = 2 micro-batches.
TEST(Zero, EqualsPlainDataParallelism) {
  SharedDir dir;
  expect_zero_like_plain(dir, dist_run(dir, 4, 2), "mpi");
}

// A ZeRO-1 checkpoint of 2 ranks resumes on 2 exactly and on 1 like the 2-rank run; a 1-rank one on 2
// (dist_run.h).
TEST(Zero, CheckpointResumesOnAnotherNumberOfRanks) {
  SharedDir dir;
  expect_zero_checkpoint_resumes_on_other_rank_counts(dir, dist_run(dir, 4, 1), 3, "mpi");
}

}  // namespace
}  // namespace gpt::test
