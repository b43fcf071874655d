// gpt-train prepare --format jsonl: instruction examples into token shards with target masks.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "data/gpt2_tokenizer.h"
#include "data/prepare.h"
#include "data/shard.h"
#include "data/target_mask.h"
#include "test_util.h"

namespace gpt {
namespace {

using test::error_message;
using test::TempDir;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

constexpr uint16_t kEot = '\n';  // the byte tokenizer's end-of-text

PrepareOptions jsonl_options(const TempDir& dir, const std::string& text) {
  std::ofstream(dir.file("in.jsonl")) << text;
  PrepareOptions o;
  o.input = dir.file("in.jsonl");
  o.out_dir = dir.file("out");
  o.format = "jsonl";
  o.val_fraction = 0.0;
  return o;
}

std::vector<uint8_t> mask_of(const std::string& shard) {
  std::vector<uint8_t> mask;
  read_mask(mask_path_for(shard), mask);
  return mask;
}

std::vector<uint16_t> bytes_of(const std::string& s) { return {s.begin(), s.end()}; }

TEST(PrepareJsonl, PaddedRowsAndTheirMask) {
  TempDir dir;
  PrepareOptions o = jsonl_options(dir, "{\"prompt\": \"ab\", \"completion\": \"c\"}\n"
                                        "{\"messages\": [{\"role\": \"assistant\", \"content\": \"xy\"}]}\n");
  o.seq_len = 16;
  const PrepareResult r = prepare_dataset(o);
  ASSERT_EQ(r.train_shards.size(), 1u);
  EXPECT_TRUE(r.masked);
  EXPECT_EQ(r.examples, 2u);
  EXPECT_EQ(r.train_tokens, 33u);  // 2 rows of 16 and the token after them
  std::vector<uint16_t> expected = bytes_of("\nabc\n");
  expected.resize(16, kEot);
  const std::vector<uint16_t> second = bytes_of("\nAssistant:\nxy\n");
  expected.insert(expected.end(), second.begin(), second.end());
  expected.resize(33, kEot);
  EXPECT_EQ(read_shard(r.train_shards[0], 256), expected);
  std::vector<uint8_t> mask(33, 0);
  mask[3] = mask[4] = 1;                                       // "c" and its end-of-text
  mask[16 + 12] = mask[16 + 13] = mask[16 + 14] = 1;           // "xy" and its end-of-text
  EXPECT_EQ(mask_of(r.train_shards[0]), mask);
  EXPECT_EQ(r.counted_tokens, 5u);
  EXPECT_EQ(r.padding_tokens, 11u + 1 + 1);  // after the first example, after the second, the final token
  EXPECT_EQ(read_mask_header(mask_path_for(r.train_shards[0])).row_length, 16u);
}

TEST(PrepareJsonl, PackedStreamCutIntoShards) {
  TempDir dir;
  PrepareOptions o = jsonl_options(dir, "{\"prompt\": \"ab\", \"completion\": \"c\"}\n"
                                        "{\"prompt\": \"d\", \"completion\": \"ef\"}\n");
  o.pack = true;
  o.shard_tokens = 5;
  const PrepareResult r = prepare_dataset(o);
  ASSERT_EQ(r.train_shards.size(), 2u);
  EXPECT_EQ(read_shard(r.train_shards[0], 256), bytes_of("\nabc\n"));
  EXPECT_EQ(read_shard(r.train_shards[1], 256), bytes_of("def\n"));
  EXPECT_EQ(mask_of(r.train_shards[0]), (std::vector<uint8_t>{0, 0, 0, 1, 1}));
  EXPECT_EQ(mask_of(r.train_shards[1]), (std::vector<uint8_t>{0, 1, 1, 1}));
  EXPECT_EQ(read_mask_header(mask_path_for(r.train_shards[1])).row_length, 0u);
  EXPECT_EQ(r.padding_tokens, 0u);
}

TEST(PrepareJsonl, ValidationIsTheLastExamples) {
  TempDir dir;
  std::string text;
  for (char c = 'a'; c < 'a' + 10; ++c) text += std::string("{\"prompt\": \"p\", \"completion\": \"") + c + "\"}\n";
  PrepareOptions o = jsonl_options(dir, text);
  o.val_fraction = 0.2;
  o.seq_len = 4;
  const PrepareResult r = prepare_dataset(o);
  ASSERT_EQ(r.val_shards.size(), 1u);
  const std::vector<uint16_t> val = read_shard(r.val_shards[0], 256);
  EXPECT_EQ(val, (std::vector<uint16_t>{kEot, 'p', 'i', kEot, kEot, 'p', 'j', kEot, kEot}));
  EXPECT_EQ(r.train_tokens, 8u * 4 + 1);
}

TEST(PrepareJsonl, BadLinesStopTheRunUnlessSkipped) {
  TempDir dir;
  PrepareOptions o = jsonl_options(dir, "{\"prompt\": \"a\", \"completion\": \"b\"}\n"
                                        "{\"prompt\": \"a\", \"completion\": \"\"}\n");
  o.seq_len = 8;
  EXPECT_THAT(error_message([&] { prepare_dataset(o); }), HasSubstr("in.jsonl line 2: empty completion"));
  EXPECT_FALSE(fs::exists(dir.file("out/train_000000.bin")));
  o.skip_bad = true;
  const PrepareResult r = prepare_dataset(o);
  EXPECT_EQ(r.examples, 1u);
  EXPECT_EQ(r.bad_lines, 1u);
}

TEST(PrepareJsonl, TooLongExamplesAreLeftOutWhenPadding) {
  TempDir dir;
  PrepareOptions o = jsonl_options(dir, "{\"prompt\": \"a\", \"completion\": \"b\"}\n"
                                        "{\"prompt\": \"abcdef\", \"completion\": \"b\"}\n");
  o.seq_len = 8;
  const PrepareResult r = prepare_dataset(o);
  EXPECT_EQ(r.examples, 1u);
  EXPECT_EQ(r.too_long_examples, 1u);
  o.seq_len = 3;
  EXPECT_THAT(error_message([&] { prepare_dataset(o); }), HasSubstr("no example of"));
}

TEST(PrepareJsonl, OptionsThatDoNotGoTogether) {
  TempDir dir;
  PrepareOptions o = jsonl_options(dir, "{\"prompt\": \"a\", \"completion\": \"b\"}\n");
  EXPECT_THAT(error_message([&] { prepare_dataset(o); }), HasSubstr("needs the row length: --seq-len T"));
  o.pack = true;
  o.seq_len = 8;
  EXPECT_THAT(error_message([&] { prepare_dataset(o); }), HasSubstr("which --pack does not use"));
  o.format = "csv";
  EXPECT_THAT(error_message([&] { prepare_dataset(o); }), HasSubstr("format 'csv' is unknown"));
  o.format = "text";
  EXPECT_THAT(error_message([&] { prepare_dataset(o); }), HasSubstr("are for instruction data"));
}

// GPT-2's ids need the uint16 shards' full range (end-of-text is 50256); the mask counts the completion's
// tokens and its end-of-text.
TEST(PrepareJsonl, Gpt2TokensAndMask) {
  const std::string dir_with_files = default_gpt2_tokenizer_dir();
  if (!fs::exists(fs::path(dir_with_files) / "encoder.json") || !fs::exists(fs::path(dir_with_files) / "vocab.bpe"))
    GTEST_SKIP() << "GPT-2 tokenizer files not in " << dir_with_files << "; run scripts/fetch_gpt2_tokenizer.sh";
  TempDir dir;
  PrepareOptions o = jsonl_options(dir, "{\"prompt\": \"Hello\", \"completion\": \" world\"}\n");
  o.tokenizer = "gpt2";
  o.pack = true;
  const PrepareResult r = prepare_dataset(o);
  EXPECT_EQ(read_shard(r.train_shards[0], 50257), (std::vector<uint16_t>{50256, 15496, 995, 50256}));
  EXPECT_EQ(mask_of(r.train_shards[0]), (std::vector<uint8_t>{0, 0, 1, 1}));
}

// A text prepare over an earlier jsonl one rewrites the shards; their masks, of other tokens, must go.
TEST(PrepareJsonl, TextPrepareRemovesStaleMasks) {
  TempDir dir;
  PrepareOptions o = jsonl_options(dir, "{\"prompt\": \"a\", \"completion\": \"b\"}\n");
  o.pack = true;
  prepare_dataset(o);
  ASSERT_TRUE(fs::exists(dir.file("out/train_000000.bin.mask")));
  std::ofstream(dir.file("in.txt")) << "plain text, no prompts";
  PrepareOptions text;
  text.input = dir.file("in.txt");
  text.out_dir = dir.file("out");
  text.val_fraction = 0.0;
  prepare_dataset(text);
  EXPECT_TRUE(fs::exists(dir.file("out/train_000000.bin")));
  EXPECT_FALSE(fs::exists(dir.file("out/train_000000.bin.mask")));
}

}  // namespace
}  // namespace gpt
