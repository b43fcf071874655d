#include "data/loader.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <set>
#include <vector>

#include "data/shard.h"
#include "test_util.h"

namespace gpt {
namespace {

using test::error_message;
using test::TempDir;
using ::testing::HasSubstr;

constexpr int kT = 8;

// Shard i holds the tokens base_i, base_i + 1, ...: every token is unique, so the first input token of a
// row names its sample. Sizes 41, 50, 33 give (n-1)/T = 5, 6, 4 samples; 15 in all.
struct Corpus {
  TempDir dir;
  std::vector<uint16_t> bases{0, 1000, 2000};
  std::vector<int> sizes{41, 50, 33};
  Corpus() {
    for (size_t i = 0; i < sizes.size(); ++i) {
      std::vector<uint16_t> tokens(sizes[i]);
      std::iota(tokens.begin(), tokens.end(), bases[i]);
      write_shard(dir.file("train_00000" + std::to_string(i) + ".bin"), tokens);
    }
  }
  std::string pattern() const { return dir.file("train_*.bin"); }
  std::set<int> all_samples() const {
    std::set<int> starts;
    for (size_t i = 0; i < sizes.size(); ++i)
      for (int k = 0; k < (sizes[i] - 1) / kT; ++k) starts.insert(bases[i] + k * kT);
    return starts;
  }
};

DataLoaderOptions options_for(const Corpus& corpus, int B, bool shuffle, uint64_t seed = 0, int rank = 0,
                              int world = 1) {
  DataLoaderOptions o;
  o.pattern = corpus.pattern();
  o.batch_size = B;
  o.seq_len = kT;
  o.vocab_size = 65536;
  o.shuffle = shuffle;
  o.seed = seed;
  o.rank = rank;
  o.world_size = world;
  return o;
}

struct Batch {
  std::vector<int32_t> inputs, targets;
  bool operator==(const Batch&) const = default;
  // The first token of each row, which names the sample.
  std::vector<int> starts() const {
    std::vector<int> s;
    for (size_t i = 0; i < inputs.size(); i += kT) s.push_back(inputs[i]);
    return s;
  }
};

Batch next(DataLoader& loader) {
  const size_t n = static_cast<size_t>(loader.options().batch_size) * kT;
  Batch b{std::vector<int32_t>(n, -1), std::vector<int32_t>(n, -1)};
  loader.next_batch(b.inputs, b.targets);
  return b;
}

std::vector<Batch> take(DataLoader& loader, int n) {
  std::vector<Batch> batches;
  for (int i = 0; i < n; ++i) batches.push_back(next(loader));
  return batches;
}

TEST(DataLoader, TargetsAreInputsShiftedByOne) {
  Corpus corpus;
  DataLoader loader(options_for(corpus, 3, true, 5));
  for (const Batch& b : take(loader, 10)) {
    for (size_t row = 0; row < b.inputs.size(); row += kT) {
      EXPECT_EQ(b.inputs[row] % 1000 % kT, 0);  // windows start at multiples of T within a shard
      for (int t = 0; t < kT; ++t) {
        EXPECT_EQ(b.targets[row + t], b.inputs[row + t] + 1);
        if (t + 1 < kT) {
          EXPECT_EQ(b.targets[row + t], b.inputs[row + t + 1]);
        }
      }
    }
  }
}

TEST(DataLoader, SequentialReadsInOrderAndResets) {
  Corpus corpus;
  DataLoader loader(options_for(corpus, 2, false));
  EXPECT_EQ(loader.num_samples(), 15u);
  EXPECT_EQ(loader.batches_per_epoch(), 7u);
  const std::vector<Batch> epoch0 = take(loader, 7);
  std::vector<int> starts;
  for (const Batch& b : epoch0) for (int s : b.starts()) starts.push_back(s);
  // The last sample of shard 2 (2024) does not fill a batch and is dropped; batch 3 spans shards 0 and 1.
  EXPECT_EQ(starts, (std::vector<int>{0, 8, 16, 24, 32, 1000, 1008, 1016, 1024, 1032, 1040, 2000, 2008, 2016}));
  EXPECT_EQ(next(loader), epoch0[0]);  // the next epoch starts over
  EXPECT_EQ(loader.position().epoch, 1u);
  loader.reset();
  EXPECT_EQ(loader.position(), LoaderPosition{});
  EXPECT_EQ(take(loader, 7), epoch0);
}

TEST(DataLoader, ShuffleIsDeterministicPerSeed) {
  Corpus corpus;
  DataLoader a(options_for(corpus, 2, true, 1234));
  DataLoader b(options_for(corpus, 2, true, 1234));
  DataLoader c(options_for(corpus, 2, true, 1235));
  const auto batches_a = take(a, 20);
  EXPECT_EQ(batches_a, take(b, 20));
  EXPECT_NE(batches_a, take(c, 20));
  DataLoader sequential(options_for(corpus, 2, false));
  EXPECT_NE(batches_a, take(sequential, 20));
}

TEST(DataLoader, ShuffleCoversEachSampleOncePerEpoch) {
  Corpus corpus;
  DataLoader loader(options_for(corpus, 1, true, 99));
  std::vector<int> epoch0, epoch1;
  for (int i = 0; i < 15; ++i) epoch0.push_back(next(loader).starts()[0]);
  for (int i = 0; i < 15; ++i) epoch1.push_back(next(loader).starts()[0]);
  EXPECT_EQ(std::set<int>(epoch0.begin(), epoch0.end()), corpus.all_samples());
  EXPECT_EQ(std::set<int>(epoch1.begin(), epoch1.end()), corpus.all_samples());
  EXPECT_NE(epoch0, epoch1);  // each epoch has its own order

  // With B = 4, 15 samples make 3 batches and 3 samples are dropped; none repeats within the epoch.
  DataLoader by4(options_for(corpus, 4, true, 99));
  std::set<int> seen;
  for (const Batch& b : take(by4, 3))
    for (int s : b.starts()) EXPECT_TRUE(seen.insert(s).second) << s;
  EXPECT_EQ(seen.size(), 12u);
}

TEST(DataLoader, RestoreContinuesExactly) {
  Corpus corpus;
  for (bool shuffle : {true, false}) {
    DataLoader reference(options_for(corpus, 2, shuffle, 7));
    std::vector<LoaderPosition> positions;
    std::vector<Batch> batches;
    for (int i = 0; i < 25; ++i) {
      positions.push_back(reference.position());
      batches.push_back(next(reference));
    }
    // 7 batches per epoch: 3 is mid-epoch, 7 the first of epoch 1, 15 mid-epoch 2.
    EXPECT_EQ(positions[7].epoch, 0u);  // the loader turns the epoch when asked for the batch
    EXPECT_EQ(positions[8].epoch, 1u);
    DataLoader resumed(options_for(corpus, 2, shuffle, 7));
    take(resumed, 4);  // restoring a loader that has moved on works as well as restoring a fresh one
    for (int start : {3, 7, 8, 15}) {
      resumed.restore(positions[start]);
      for (int i = start; i < 25; ++i) ASSERT_EQ(next(resumed), batches[i]) << "shuffle " << shuffle << " from " << start;
      EXPECT_EQ(resumed.position(), reference.position());
    }
  }
}

TEST(DataLoader, RanksSplitTheGlobalBatch) {
  Corpus corpus;
  for (bool shuffle : {true, false}) {
    DataLoader whole(options_for(corpus, 4, shuffle, 3));
    DataLoader rank0(options_for(corpus, 2, shuffle, 3, 0, 2));
    DataLoader rank1(options_for(corpus, 2, shuffle, 3, 1, 2));
    EXPECT_EQ(rank0.batches_per_epoch(), whole.batches_per_epoch());
    for (int i = 0; i < 10; ++i) {
      const Batch w = next(whole), r0 = next(rank0), r1 = next(rank1);
      std::vector<int32_t> joined = r0.inputs;
      joined.insert(joined.end(), r1.inputs.begin(), r1.inputs.end());
      EXPECT_EQ(joined, w.inputs) << i;
      for (int s : r0.starts()) {
        const auto other = r1.starts();
        EXPECT_EQ(std::count(other.begin(), other.end(), s), 0);
      }
      EXPECT_EQ(rank0.position(), whole.position());
      EXPECT_EQ(rank1.position(), whole.position());
    }
  }
}

TEST(DataLoader, SkipsShortShardsAndFailsWhenAllAreShort) {
  Corpus corpus;
  write_shard(corpus.dir.file("train_000009.bin"), std::vector<uint16_t>(kT, 1));  // needs T+1
  DataLoader loader(options_for(corpus, 2, false));
  EXPECT_EQ(loader.shard_paths().size(), 3u);
  EXPECT_EQ(loader.num_samples(), 15u);

  TempDir dir;
  write_shard(dir.file("a.bin"), std::vector<uint16_t>(kT, 1));
  write_shard(dir.file("b.bin"), std::vector<uint16_t>{});
  DataLoaderOptions o = options_for(corpus, 1, false);
  o.pattern = dir.file("*.bin");
  const std::string msg = error_message([&] { DataLoader l(o); });
  EXPECT_THAT(msg, HasSubstr(o.pattern));
  EXPECT_THAT(msg, HasSubstr("data.train: no token shard"));
  EXPECT_THAT(msg, HasSubstr("seq_len + 1 = 9 tokens: give data.train more tokens or lower train.seq_len"));
}

TEST(DataLoader, FailsWithoutOneGlobalBatch) {
  Corpus corpus;
  const std::string msg = error_message([&] { DataLoader l(options_for(corpus, 8, false, 0, 0, 2)); });
  EXPECT_THAT(msg, HasSubstr(corpus.pattern()));
  EXPECT_THAT(msg, HasSubstr("15 samples"));
  EXPECT_THAT(msg, HasSubstr("global batch of 16"));
  EXPECT_THAT(msg, HasSubstr("lower train.batch_size, or give data.train more tokens or lower train.seq_len"));
  // A validation set too small for one batch says which set it is, and that validation can be left out.
  DataLoaderOptions val = options_for(corpus, 8, false, 0, 0, 2);
  val.key = "data.val";
  const std::string val_msg = error_message([&] { DataLoader l(val); });
  EXPECT_THAT(val_msg, HasSubstr("data.val: the 3 token shard(s)"));
  EXPECT_THAT(val_msg, HasSubstr("or set data.val: \"\" to train without validation"));
}

TEST(DataLoader, ValidatesTokensWhenAShardIsLoaded) {
  TempDir dir;
  std::vector<uint16_t> tokens(3 * kT + 1, 5);
  tokens[kT + 2] = 300;
  write_shard(dir.file("bad.bin"), tokens);
  DataLoaderOptions o;
  o.pattern = dir.file("*.bin");
  o.batch_size = 1;
  o.seq_len = kT;
  o.vocab_size = 256;
  DataLoader loader(o);
  std::vector<int32_t> in(kT), tg(kT);
  const std::string msg = error_message([&] { loader.next_batch(in, tg); });
  EXPECT_THAT(msg, HasSubstr(dir.file("bad.bin")));
  EXPECT_THAT(msg, HasSubstr("token 300 at index 10 (byte offset 1044) is ≥ vocab size 256"));
  EXPECT_EQ(loader.position(), LoaderPosition{});  // the failed batch did not advance the loader
}

TEST(DataLoader, RejectsBadArguments) {
  Corpus corpus;
  DataLoader loader(options_for(corpus, 2, true, 1));
  std::vector<int32_t> small(kT), right(2 * kT);
  EXPECT_THAT(error_message([&] { loader.next_batch(small, right); }), HasSubstr("batch_size × seq_len = 16"));
  EXPECT_THAT(error_message([&] { loader.restore({0, 3, 0}); }), HasSubstr("only 3 token shard(s)"));
  EXPECT_THAT(error_message([&] { loader.restore({0, 0, 7}); }), HasSubstr("sample 7"));
  EXPECT_THAT(error_message([&] { DataLoader l(options_for(corpus, 1, false, 0, 2, 2)); }),
              HasSubstr("rank 2 is outside world size 2"));
  DataLoaderOptions o = options_for(corpus, 1, false);
  o.pattern = corpus.dir.file("val_*.bin");
  EXPECT_THAT(error_message([&] { DataLoader l(o); }), HasSubstr(o.pattern));
}

TEST(SeededPermutation, IsAPermutationAndStable) {
  const std::vector<uint32_t> p = seeded_permutation(1000, 42, 3, 5);
  std::vector<uint32_t> sorted = p;
  std::sort(sorted.begin(), sorted.end());
  for (uint32_t i = 0; i < 1000; ++i) ASSERT_EQ(sorted[i], i);
  EXPECT_EQ(p, seeded_permutation(1000, 42, 3, 5));
  EXPECT_NE(p, seeded_permutation(1000, 43, 3, 5));
  EXPECT_NE(p, seeded_permutation(1000, 42, 4, 5));
  EXPECT_NE(p, seeded_permutation(1000, 42, 3, 6));
  EXPECT_TRUE(seeded_permutation(0, 1, 0, 0).empty());
  EXPECT_EQ(seeded_permutation(1, 1, 0, 0), std::vector<uint32_t>{0});
  // Pinned so that a change of the shuffle (which would change every run's data order) is noticed.
  EXPECT_EQ(seeded_permutation(10, 1, 0, 0), (std::vector<uint32_t>{2, 0, 3, 1, 5, 6, 7, 4, 9, 8}));
}

}  // namespace
}  // namespace gpt
