#include "data/gpt2_tokenizer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <random>

#include "config/config_loader.h"
#include "data/gpt2_pretokenizer.h"
#include "data/prepare.h"
#include "data/shard.h"
#include "test_util.h"

namespace gpt {
namespace {

namespace fs = std::filesystem;
using test::error_message;
using ::testing::HasSubstr;

std::vector<std::string> pieces(std::string_view text) {
  std::vector<std::string> out;
  Gpt2PreTokenizer pre(text);
  std::string_view piece;
  while (pre.next(piece)) out.emplace_back(piece);
  return out;
}

using Pieces = std::vector<std::string>;

TEST(Gpt2PreTokenizer, SplitsLikeGpt2sRegex) {
  EXPECT_EQ(pieces("Hello world"), (Pieces{"Hello", " world"}));
  EXPECT_EQ(pieces("I'm DON'T we'll"), (Pieces{"I", "'m", " DON", "'", "T", " we", "'ll"}));
  EXPECT_EQ(pieces("a  b"), (Pieces{"a", " ", " b"}));
  EXPECT_EQ(pieces("a \n\n b"), (Pieces{"a", " \n\n", " b"}));
  EXPECT_EQ(pieces("a\n\tb"), (Pieces{"a", "\n", "\t", "b"}));
  EXPECT_EQ(pieces("end   "), (Pieces{"end", "   "}));
  EXPECT_EQ(pieces("x1234 ...!? 5"), (Pieces{"x", "1234", " ...!?", " 5"}));
  EXPECT_EQ(pieces("!!'s"), (Pieces{"!!'", "s"}));
  EXPECT_EQ(pieces(""), Pieces{});
  // Unicode classes: Greek letters, Arabic-Indic digits, a combining accent (Mn: "other").
  EXPECT_EQ(pieces("\xce\xb1\xce\xb2 \xd9\xa1\xd9\xa2 e\xcc\x81"),
            (Pieces{"\xce\xb1\xce\xb2", " \xd9\xa1\xd9\xa2", " e", "\xcc\x81"}));
}

// Where JavaScript's \s and Unicode's White_Space differ (so the npm reference cannot check these):
// U+0085 (NEL) is white space, U+FEFF (BOM) is not; as in Python's regex module.
TEST(Gpt2PreTokenizer, WhiteSpaceIsUnicodeWhiteSpace) {
  EXPECT_EQ(pieces("a\xc2\x85\xc2\x85" "b"), (Pieces{"a", "\xc2\x85", "\xc2\x85", "b"}));
  EXPECT_EQ(pieces("a\xef\xbb\xbf" "b"), (Pieces{"a", "\xef\xbb\xbf", "b"}));
  EXPECT_EQ(pieces("x\xe3\x80\x80\xe3\x80\x80y"), (Pieces{"x", "\xe3\x80\x80", "\xe3\x80\x80", "y"}));
}

// Each maximal ill-formed subsequence is one "other" character: it joins runs of punctuation.
TEST(Gpt2PreTokenizer, InvalidUtf8IsOtherAndKeepsItsBytes) {
  EXPECT_EQ(pieces("a\xff\xfe!b"), (Pieces{"a", "\xff\xfe!", "b"}));
  EXPECT_EQ(pieces(" \xe2\x82"), (Pieces{" \xe2\x82"}));                 // truncated 3-byte sequence
  EXPECT_EQ(pieces("ab\xed\xa0\x80" "cd"), (Pieces{"ab", "\xed\xa0\x80", "cd"}));  // encoded surrogate
  EXPECT_EQ(pieces("\xc0\xaf x"), (Pieces{"\xc0\xaf", " x"}));           // overlong '/'
}

// A vocabulary of the 256 bytes plus the given merged strings, in GPT-2's file formats.
struct TinyVocab {
  std::string vocab_json;
  std::string merges;
};

TinyVocab tiny_vocab(const std::vector<std::pair<std::string, std::string>>& merges) {
  nlohmann::json vocab = nlohmann::json::object();
  int id = 0;
  int shifted = 0;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    const int c = printable ? b : 256 + shifted++;
    std::string s;
    if (c < 0x80) {
      s.push_back(static_cast<char>(c));
    } else {
      s.push_back(static_cast<char>(0xC0 | (c >> 6)));
      s.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    }
    vocab[s] = id++;
  }
  std::string text = "#version: 0.2\n";
  for (const auto& [l, r] : merges) {
    if (!vocab.contains(l + r)) vocab[l + r] = id++;
    text += l + " " + r + "\n";
  }
  vocab["<|endoftext|>"] = id++;
  return {vocab.dump(), text};
}

Gpt2Tokenizer tiny_tokenizer(const std::vector<std::pair<std::string, std::string>>& merges) {
  const TinyVocab v = tiny_vocab(merges);
  return Gpt2Tokenizer(v.vocab_json, "vocab.json", v.merges, "merges.txt");
}

std::vector<std::string> token_strings(const Gpt2Tokenizer& tok, const std::vector<int>& ids) {
  std::vector<std::string> out;
  for (const int id : ids) out.push_back(tok.decode(std::vector<int>{id}));
  return out;
}

TEST(Gpt2Tokenizer, MergesLowestRankFirst) {
  const Gpt2Tokenizer tok = tiny_tokenizer({{"b", "c"}, {"a", "b"}, {"a", "bc"}, {"abc", "d"}});
  EXPECT_EQ(token_strings(tok, tok.encode_piece("abcd")), (Pieces{"abcd"}));
  EXPECT_EQ(token_strings(tok, tok.encode_piece("abab")), (Pieces{"ab", "ab"}));
  EXPECT_EQ(token_strings(tok, tok.encode_piece("aaa")), (Pieces{"a", "a", "a"}));
  EXPECT_EQ(tok.vocab_size(), 256 + 4 + 1);
  EXPECT_EQ(tok.eot_token(), 260);
}

// encoder.py merges every occurrence of the best pair before it looks at the pairs those merges create.
// Here "ab a" ranks above "a b": merging one "ab" at a time, lowest rank first, would give "aba b".
TEST(Gpt2Tokenizer, MergesAllOccurrencesOfARankBeforeTheNext) {
  const Gpt2Tokenizer tok = tiny_tokenizer({{"ab", "a"}, {"a", "b"}});
  EXPECT_EQ(token_strings(tok, tok.encode_piece("abab")), (Pieces{"ab", "ab"}));
  EXPECT_EQ(token_strings(tok, tok.encode_piece("aaaa")), (Pieces{"a", "a", "a", "a"}));
  const Gpt2Tokenizer overlap = tiny_tokenizer({{"a", "a"}});
  EXPECT_EQ(token_strings(overlap, overlap.encode_piece("aaaaa")), (Pieces{"aa", "aa", "a"}));
}

// encode() runs every piece through one set of working arrays and its word cache; each piece must still
// get what encode_piece gives it alone, long pieces after short ones and repeats included.
TEST(Gpt2Tokenizer, EncodeGivesEachPieceWhatEncodePieceGivesIt) {
  const Gpt2Tokenizer tok = tiny_tokenizer({{"a", "b"}, {"ab", "a"}, {"a", "a"}, {"b", "c"}, {"Ġ", "a"}, {"Ġa", "b"}});
  std::mt19937 rng(11);
  for (int i = 0; i < 300; ++i) {
    std::string text(rng() % 200, '\0');
    for (char& c : text) c = "abc  .9\n"[rng() % 8];
    std::vector<int> expected;
    Gpt2PreTokenizer pre(text);
    std::string_view piece;
    while (pre.next(piece)) {
      const std::vector<int> ids = tok.encode_piece(piece);
      expected.insert(expected.end(), ids.begin(), ids.end());
    }
    EXPECT_EQ(tok.encode(text), expected) << "text '" << text << "'";
  }
}

TEST(Gpt2Tokenizer, RoundTripsRandomBytes) {
  const Gpt2Tokenizer tok = tiny_tokenizer({{"a", "b"}, {"Ġ", "t"}, {"Ġt", "h"}});
  std::mt19937 rng(7);
  for (int i = 0; i < 200; ++i) {
    std::string text(rng() % 64, '\0');
    for (char& c : text) c = static_cast<char>(rng() % 8 == 0 ? 'a' + rng() % 3 : rng() % 256);
    EXPECT_EQ(tok.decode(tok.encode(text)), text);
  }
}

TEST(Gpt2Tokenizer, BadFilesNameTheFileAndPlace) {
  const TinyVocab v = tiny_vocab({{"a", "b"}});
  EXPECT_THAT(error_message([&] { Gpt2Tokenizer("{\"a\": 0,", "enc.json", v.merges, "m.bpe"); }),
              HasSubstr("enc.json: not valid JSON at byte offset 8"));
  EXPECT_THAT(error_message([&] { Gpt2Tokenizer("{\"a\": 1}", "enc.json", v.merges, "m.bpe"); }),
              HasSubstr("has id 1, outside 0..0"));
  EXPECT_THAT(error_message([&] { Gpt2Tokenizer("{\"a\": 0}", "enc.json", v.merges, "m.bpe"); }),
              HasSubstr("no token for byte 0"));
  EXPECT_THAT(error_message([&] { Gpt2Tokenizer(v.vocab_json, "enc.json", "#version: 0.2\na b\nx\n", "m.bpe"); }),
              HasSubstr("m.bpe: line 3 (byte offset 18) is \"x\""));
  EXPECT_THAT(error_message([&] { Gpt2Tokenizer(v.vocab_json, "enc.json", "a b\nc d\n", "m.bpe"); }),
              HasSubstr("line 2 (byte offset 4) merges \"c\" and \"d\", but \"cd\" is not in enc.json"));
  EXPECT_THAT(error_message([] { Gpt2Tokenizer(fs::temp_directory_path().string() + "/no_such_gpt2_dir"); }),
              HasSubstr("fetch_gpt2_tokenizer.sh"));
  EXPECT_THAT(error_message([&] { tiny_tokenizer({}).decode(std::vector<int>{3, 999}); }),
              HasSubstr("token 999 at index 1"));
}

TEST(Gpt2Tokenizer, ConfigNeedsTheWholeVocabulary) {
  EXPECT_THAT(error_message([] { load_config_from_string("data: {tokenizer: gpt2}\n"); }),
              HasSubstr("model.vocab_size: 256 is smaller than the 50257 tokens of data.tokenizer gpt2"));
  const Config config = load_config_from_string("model: {vocab_size: 50257}\ndata: {tokenizer: gpt2, tokenizer_path: /x}\n");
  EXPECT_EQ(config.data.tokenizer_path, "/x");
}

// The real GPT-2 files (scripts/fetch_gpt2_tokenizer.sh; scripts/test.sh fetches them).
const Gpt2Tokenizer* real_gpt2() {
  static const std::unique_ptr<Gpt2Tokenizer> tok = []() -> std::unique_ptr<Gpt2Tokenizer> {
    const fs::path dir = default_gpt2_tokenizer_dir();
    if (!fs::exists(dir / "encoder.json") || !fs::exists(dir / "vocab.bpe")) return nullptr;
    return std::make_unique<Gpt2Tokenizer>(dir.string());
  }();
  return tok.get();
}

#define REQUIRE_GPT2(tok)                                                                                  \
  const Gpt2Tokenizer* tok = real_gpt2();                                                                  \
  if (tok == nullptr)                                                                                      \
  GTEST_SKIP() << "GPT-2 tokenizer files not in " << default_gpt2_tokenizer_dir()                          \
               << "; run scripts/fetch_gpt2_tokenizer.sh"

TEST(Gpt2TokenizerFiles, Shape) {
  REQUIRE_GPT2(tok);
  EXPECT_EQ(tok->vocab_size(), 50257);
  EXPECT_EQ(tok->eot_token(), 50256);
  EXPECT_EQ(tok->num_merges(), 50000u);
  EXPECT_EQ(tok->encode("Hello world"), (std::vector<int>{15496, 995}));
}

// Token ids from the npm package gpt-3-encoder (tests/data/gpt2/make_reference.js): fixed tricky strings
// and 400 random strings over letters, digits, spaces, apostrophes, emoji and marks of many scripts.
TEST(Gpt2TokenizerFiles, MatchesTheJavaScriptEncoder) {
  REQUIRE_GPT2(tok);
  std::ifstream in(std::string(GPT_SOURCE_DIR) + "/tests/data/gpt2/reference.json");
  ASSERT_TRUE(in.is_open());
  const nlohmann::json reference = nlohmann::json::parse(in);
  size_t n = 0;
  for (const auto& c : reference.at("cases")) {
    const std::string text = c.at("text").get<std::string>();
    EXPECT_EQ(tok->encode(text), c.at("ids").get<std::vector<int>>()) << "text: \"" << text << "\"";
    EXPECT_EQ(tok->decode(c.at("ids").get<std::vector<int>>()), text);
    ++n;
  }
  EXPECT_GT(n, 400u);
}

TEST(Gpt2TokenizerFiles, RoundTripsRandomUtf8AndBytes) {
  REQUIRE_GPT2(tok);
  std::mt19937 rng(11);
  const std::vector<std::string> chars = {"a", "Z", " ", "  ", "\n", "'", "s", "9", "\xc3\xa9", "\xe4\xb8\xad",
                                          "\xf0\x9f\x98\x80", "\xcc\x81", "\xff", "\xe2\x82"};
  for (int i = 0; i < 300; ++i) {
    std::string text;
    const int len = static_cast<int>(rng() % 40);
    for (int j = 0; j < len; ++j)
      text += i % 2 == 0 ? chars[rng() % chars.size()] : std::string(1, static_cast<char>(rng() % 256));
    EXPECT_EQ(tok->decode(tok->encode(text)), text);
  }
}

// One document per file, opened by the end-of-text token; the shards decode back to the text.
TEST(Gpt2TokenizerFiles, PrepareWritesEotThenTheText) {
  REQUIRE_GPT2(tok);
  test::TempDir dir;
  std::string text;
  for (int i = 0; i < 50; ++i) text += "In the beginning God created the heaven and the earth. Verse " + std::to_string(i) + "\n";
  test::write_bytes(dir.file("in.txt"), text.data(), text.size());
  PrepareOptions options;
  options.input = dir.file("in.txt");
  options.out_dir = dir.file("out");
  options.val_fraction = 0.0;
  options.tokenizer = "gpt2";
  options.shard_tokens = 100;
  const PrepareResult result = prepare_dataset(options);
  EXPECT_EQ(result.vocab_size, 50257);
  ASSERT_GT(result.train_shards.size(), 1u);
  std::vector<int> ids;
  for (const auto& path : result.train_shards)
    for (const uint16_t t : read_shard(path, 50257)) ids.push_back(t);
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids[0], 50256);
  EXPECT_EQ(tok->decode(std::span<const int>(ids).subspan(1)), text);
}

TEST(Gpt2TokenizerFiles, TokenizeCommandRoundTrips) {
  REQUIRE_GPT2(tok);
  test::TempDir dir;
  const std::string text = "Hello world, it's 2024!\n";
  test::write_bytes(dir.file("in.txt"), text.data(), text.size());
  const std::string exe = GPT_TRAIN_EXE;
  ASSERT_EQ(std::system((exe + " tokenize " + dir.file("in.txt") + " > " + dir.file("ids.txt")).c_str()), 0);
  std::ifstream ids_in(dir.file("ids.txt"));
  const std::string ids((std::istreambuf_iterator<char>(ids_in)), {});
  std::string expected;
  for (const int id : tok->encode(text)) expected += (expected.empty() ? "" : " ") + std::to_string(id);
  EXPECT_EQ(ids, expected + "\n");
  ASSERT_EQ(std::system((exe + " tokenize --decode " + dir.file("ids.txt") + " > " + dir.file("back.txt")).c_str()), 0);
  std::ifstream back_in(dir.file("back.txt"), std::ios::binary);
  EXPECT_EQ(std::string((std::istreambuf_iterator<char>(back_in)), {}), text);
}

}  // namespace
}  // namespace gpt
