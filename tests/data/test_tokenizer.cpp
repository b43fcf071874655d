#include "data/tokenizer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "test_util.h"

namespace gpt {
namespace {

using test::error_message;
using ::testing::HasSubstr;

TEST(ByteTokenizer, RoundTripsEveryByte) {
  ByteTokenizer tok;
  std::string text;
  for (int i = 0; i < 256; ++i) text.push_back(static_cast<char>(i));
  text += std::string("\0\xff\0 tail \xff", 9);
  const std::vector<int> tokens = tok.encode(text);
  ASSERT_EQ(tokens.size(), text.size());
  for (int i = 0; i < 256; ++i) EXPECT_EQ(tokens[i], i);
  EXPECT_EQ(tokens[256], 0);
  EXPECT_EQ(tokens[257], 255);
  EXPECT_EQ(tok.decode(tokens), text);
}

TEST(ByteTokenizer, Properties) {
  const auto tok = make_tokenizer("byte");
  EXPECT_EQ(tok->name(), "byte");
  EXPECT_EQ(tok->vocab_size(), 256);
  EXPECT_EQ(tok->eot_token(), 10);
  EXPECT_TRUE(tok->encode("").empty());
  EXPECT_EQ(tok->decode(std::vector<int>{}), "");
}

TEST(ByteTokenizer, RejectsTokensOutsideTheVocab) {
  ByteTokenizer tok;
  const std::vector<int> bad{65, 256};
  EXPECT_THAT(error_message([&] { tok.decode(bad); }), HasSubstr("token 256 at index 1"));
  const std::vector<int> negative{-1};
  EXPECT_THAT(error_message([&] { tok.decode(negative); }), HasSubstr("token -1"));
}

TEST(Tokenizer, UnknownNameListsTheChoices) {
  const std::string msg = error_message([] { make_tokenizer("gpt3"); });
  EXPECT_THAT(msg, HasSubstr("gpt3"));
  EXPECT_THAT(msg, HasSubstr("byte"));
}

}  // namespace
}  // namespace gpt
