#include "core/philox.h"

#include <gtest/gtest.h>

namespace gpt {

// Known-answer vectors from the Random123 distribution (kat_vectors, philox4x32 10 rounds).
TEST(Philox, MatchesRandom123KnownAnswers) {
  Philox4 zero = philox4x32_10(Philox4{{0, 0, 0, 0}}, 0, 0);
  EXPECT_EQ(zero.v[0], 0x6627e8d5u);
  EXPECT_EQ(zero.v[1], 0xe169c58du);
  EXPECT_EQ(zero.v[2], 0xbc57ac4cu);
  EXPECT_EQ(zero.v[3], 0x9b00dbd8u);
  Philox4 ones = philox4x32_10(Philox4{{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}}, 0xffffffffu, 0xffffffffu);
  EXPECT_EQ(ones.v[0], 0x408f276du);
  EXPECT_EQ(ones.v[1], 0x41c83b0eu);
  EXPECT_EQ(ones.v[2], 0xa20bc7c6u);
  EXPECT_EQ(ones.v[3], 0x6d5451fdu);
}

TEST(Philox, StreamsDifferBySiteAndRepeatExactly) {
  RngStream a{42, 3, 1, 2, RngSite::AttentionProbs};
  RngStream b = a;
  b.site = RngSite::MlpResidual;
  int same = 0;
  for (uint64_t i = 0; i < 1000; ++i) {
    EXPECT_EQ(a.word(i), RngStream(a).word(i));
    same += a.word(i) == b.word(i);
  }
  EXPECT_LT(same, 3);
}

TEST(Philox, DropoutThresholdKeepsTheRightFraction) {
  RngStream s{7, 0, 0, 0, RngSite::AttentionResidual};
  const uint32_t threshold = dropout_threshold(0.25f);
  int kept = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) kept += s.word(i) >= threshold;
  EXPECT_NEAR(kept / double(n), 0.75, 0.005);
}

// Past 2^34 elements (2^32 blocks) the block index widens the key: the words do not repeat the first
// 2^34 elements', and below it they are the 32-bit counter's (the counter's first word, the key as seeded).
TEST(Philox, BlocksPast2To32DrawFreshWords) {
  const RngStream s{0x1234567890abcdefull, 5, 1, 3, RngSite::AttentionProbs};
  for (uint64_t block : {uint64_t{0}, uint64_t{17}, uint64_t{0xFFFFFFFFu}}) {
    const Philox4 low = s.block(block), high = s.block(block + (uint64_t{1} << 32));
    const Philox4 direct = philox4x32_10(Philox4{{static_cast<uint32_t>(block), (3u << 8) | 1u, 1, 5}}, 0x90abcdefu,
                                         0x12345678u);
    int same = 0;
    for (int i = 0; i < 4; ++i) {
      EXPECT_EQ(low.v[i], direct.v[i]);
      same += low.v[i] == high.v[i];
    }
    EXPECT_LT(same, 2) << "block " << block;
    EXPECT_EQ(s.word(4 * (block + (uint64_t{1} << 32)) + 2), high.v[2]);
  }
}

}  // namespace gpt
