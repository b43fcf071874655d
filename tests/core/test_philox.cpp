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

}  // namespace gpt
