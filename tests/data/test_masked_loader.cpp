// The data loader over shards with target masks (target_mask.h): targets -1 exactly where the mask says.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <numeric>
#include <set>
#include <vector>

#include "data/instruction_data.h"
#include "data/loader.h"
#include "data/shard.h"
#include "data/target_mask.h"
#include "test_util.h"

namespace gpt {
namespace {

using test::error_message;
using test::TempDir;
using ::testing::HasSubstr;

DataLoaderOptions options(const std::string& pattern, int B, int T, bool shuffle) {
  DataLoaderOptions o;
  o.pattern = pattern;
  o.batch_size = B;
  o.seq_len = T;
  o.vocab_size = 1000;
  o.shuffle = shuffle;
  o.seed = 3;
  return o;
}

// Tokens 0..n-1 (each names its position) with every third token's target masked.
struct MaskedShard {
  TempDir dir;
  std::vector<uint16_t> tokens;
  std::vector<uint8_t> mask;
  explicit MaskedShard(size_t n) : tokens(n), mask(n) {
    std::iota(tokens.begin(), tokens.end(), uint16_t{0});
    for (size_t i = 0; i < n; ++i) mask[i] = i % 3 != 0;
    write_shard(dir.file("train_000000.bin"), tokens);
    write_mask(dir.file("train_000000.bin.mask"), mask, tokens, 0);
  }
};

TEST(MaskedLoader, TargetsAreMinusOneExactlyWhereTheMaskIsZero) {
  MaskedShard shard(41);  // 5 samples of T = 8
  for (const bool shuffle : {false, true}) {
    DataLoader loader(options(shard.dir.file("train_*"), 5, 8, shuffle));  // the glob also matches the mask
    ASSERT_EQ(loader.shard_paths().size(), 1u);
    std::vector<int32_t> in(40), tg(40);
    loader.next_batch(in, tg);
    std::set<int32_t> starts;
    for (size_t i = 0; i < in.size(); ++i) {
      const auto next = static_cast<size_t>(in[i]) + 1;
      EXPECT_EQ(tg[i], shard.mask[next] ? static_cast<int32_t>(next) : -1) << "input token " << in[i];
      if (i % 8 == 0) starts.insert(in[i]);
    }
    EXPECT_EQ(starts, (std::set<int32_t>{0, 8, 16, 24, 32}));
  }
}

TEST(MaskedLoader, ShardsWithoutAMaskCountEveryTarget) {
  MaskedShard shard(17);
  std::vector<uint16_t> plain(17);
  std::iota(plain.begin(), plain.end(), uint16_t{100});
  write_shard(shard.dir.file("train_000001.bin"), plain);
  DataLoader loader(options(shard.dir.file("train_*.bin"), 4, 8, false));
  std::vector<int32_t> in(32), tg(32);
  loader.next_batch(in, tg);
  EXPECT_EQ(std::count(tg.begin(), tg.begin() + 16, -1), 5);  // tokens 3, 6, 9, 12, 15 of the masked shard
  EXPECT_EQ(std::count(tg.begin() + 16, tg.end(), -1), 0);
}

// Padded instruction rows: every row starts at its example's end-of-text, and exactly the completion and
// its end-of-text count; prompt, padding and the next row's first token are -1.
TEST(MaskedLoader, PaddedRowsCountOnlyTheCompletions) {
  TempDir dir;
  const int eot = 9;
  const std::vector<TokenizedExample> examples = {{{1, 2, 3, 9}, {0, 0, 1, 1}}, {{4, 5, eot}, {0, 1, 1}},
                                                  {{6, 7, 8, 3, 2, eot}, {0, 0, 0, 1, 1, 1}}};
  const MaskedTokens rows = pad_examples(examples, eot, 7);
  write_shard(dir.file("train_000000.bin"), rows.tokens);
  write_mask(dir.file("train_000000.bin.mask"), rows.counted, rows.tokens, 7);
  DataLoader loader(options(dir.file("train_*.bin"), 3, 7, false));
  std::vector<int32_t> in(21), tg(21);
  loader.next_batch(in, tg);
  EXPECT_EQ(in, (std::vector<int32_t>{eot, 1, 2, 3, eot, eot, eot, eot, 4, 5, eot, eot, eot, eot,  //
                                      eot, 6, 7, 8, 3, 2, eot}));
  EXPECT_EQ(tg, (std::vector<int32_t>{-1, -1, 3, eot, -1, -1, -1, -1, 5, eot, -1, -1, -1, -1,  //
                                      -1, -1, -1, 3, 2, eot, -1}));
}

TEST(MaskedLoader, PaddedRowsNeedTheirSeqLen) {
  TempDir dir;
  const std::vector<TokenizedExample> examples = {{{1, 9}, {1, 1}}, {{2, 9}, {1, 1}}};
  const MaskedTokens rows = pad_examples(examples, 9, 4);
  write_shard(dir.file("train_000000.bin"), rows.tokens);
  write_mask(dir.file("train_000000.bin.mask"), rows.counted, rows.tokens, 4);
  EXPECT_THAT(error_message([&] { DataLoader loader(options(dir.file("train_*.bin"), 1, 3, false)); }),
              HasSubstr("padded to rows of 4 tokens (prepare --seq-len 4), but seq_len is 3"));
}

TEST(MaskedLoader, AMaskOfOtherTokensIsAnError) {
  MaskedShard shard(17);
  std::vector<uint16_t> other = shard.tokens;
  std::reverse(other.begin(), other.end());
  write_shard(shard.dir.file("train_000000.bin"), other);  // rewritten, its mask left as it was
  DataLoader loader(options(shard.dir.file("train_*.bin"), 1, 8, false));
  std::vector<int32_t> in(8), tg(8);
  EXPECT_THAT(error_message([&] { loader.next_batch(in, tg); }),
              HasSubstr("was written for other tokens than token shard"));
  EXPECT_EQ(loader.position(), LoaderPosition{});

  write_shard(shard.dir.file("train_000000.bin"), std::vector<uint16_t>(25, 1));
  EXPECT_THAT(error_message([&] { DataLoader again(options(shard.dir.file("train_*.bin"), 1, 8, false)); }),
              HasSubstr("covers 17 tokens, but token shard"));
}

}  // namespace
}  // namespace gpt
