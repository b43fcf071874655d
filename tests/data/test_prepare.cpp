#include "data/prepare.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "data/shard.h"
#include "test_util.h"

namespace gpt {
namespace {

using test::error_message;
using test::TempDir;
using test::write_bytes;
using ::testing::HasSubstr;

std::string make_text(size_t n) {
  std::string text;
  for (size_t i = 0; i < n; ++i) text.push_back(static_cast<char>((i * 7 + i / 13) % 256));
  return text;
}

std::string read_split(const std::vector<std::string>& shards) {
  std::string text;
  for (const auto& path : shards)
    for (uint16_t t : read_shard(path, 256)) text.push_back(static_cast<char>(t));
  return text;
}

TEST(Prepare, SplitsTheTailOffAsValidation) {
  TempDir dir;
  const std::string text = make_text(1000);
  write_bytes(dir.file("input.txt"), text.data(), text.size());
  PrepareOptions options;
  options.input = dir.file("input.txt");
  options.out_dir = dir.file("out/nested");
  options.val_fraction = 0.1;
  options.shard_tokens = 256;
  const PrepareResult result = prepare_dataset(options);

  EXPECT_EQ(result.tokenizer, "byte");
  EXPECT_EQ(result.vocab_size, 256);
  EXPECT_EQ(result.text_bytes, 1000u);
  EXPECT_EQ(result.train_tokens, 900u);
  EXPECT_EQ(result.val_tokens, 100u);
  ASSERT_EQ(result.train_shards.size(), 4u);
  ASSERT_EQ(result.val_shards.size(), 1u);
  EXPECT_EQ(result.train_shards[0], dir.file("out/nested/train_000000.bin"));
  EXPECT_EQ(result.train_shards[3], dir.file("out/nested/train_000003.bin"));
  EXPECT_EQ(result.val_shards[0], dir.file("out/nested/val_000000.bin"));
  EXPECT_EQ(read_shard_header(result.train_shards[0]).num_tokens, 256u);
  EXPECT_EQ(read_shard_header(result.train_shards[3]).num_tokens, 900u - 3 * 256);
  EXPECT_EQ(read_split(result.train_shards), text.substr(0, 900));
  EXPECT_EQ(read_split(result.val_shards), text.substr(900));
  EXPECT_EQ(expand_shard_glob(dir.file("out/nested/train_*.bin")), result.train_shards);
}

TEST(Prepare, RoundsTheValidationShare) {
  TempDir dir;
  const std::string text = make_text(37);
  write_bytes(dir.file("input.txt"), text.data(), text.size());
  PrepareOptions options{dir.file("input.txt"), dir.file("out"), 0.25, "byte", 1000};
  const PrepareResult result = prepare_dataset(options);
  EXPECT_EQ(result.val_tokens, 9u);  // round(9.25)
  EXPECT_EQ(result.train_tokens, 28u);
  EXPECT_EQ(read_split(result.val_shards), text.substr(28));
}

TEST(Prepare, NoValidationWhenTheFractionIsZero) {
  TempDir dir;
  const std::string text = make_text(50);
  write_bytes(dir.file("input.txt"), text.data(), text.size());
  const PrepareResult result = prepare_dataset({dir.file("input.txt"), dir.file("out"), 0.0, "byte", 1000});
  EXPECT_EQ(result.train_tokens, 50u);
  EXPECT_EQ(result.val_tokens, 0u);
  EXPECT_TRUE(result.val_shards.empty());
  EXPECT_EQ(read_split(result.train_shards), text);
}

TEST(Prepare, RemovesStaleShardsOfAnEarlierRun) {
  TempDir dir;
  const std::string text = make_text(100);
  write_bytes(dir.file("input.txt"), text.data(), text.size());
  PrepareOptions options{dir.file("input.txt"), dir.file("out"), 0.2, "byte", 10};
  EXPECT_EQ(prepare_dataset(options).train_shards.size(), 8u);
  write_bytes(dir.file("out/notes.txt"), "x", 1);
  options.shard_tokens = 1000;
  const PrepareResult result = prepare_dataset(options);
  EXPECT_EQ(expand_shard_glob(dir.file("out/train_*.bin")), result.train_shards);
  EXPECT_EQ(expand_shard_glob(dir.file("out/val_*.bin")), result.val_shards);
  EXPECT_TRUE(std::filesystem::exists(dir.file("out/notes.txt")));
}

TEST(Prepare, MissingOrEmptyInputIsNamed) {
  TempDir dir;
  const std::string missing = dir.file("missing.txt");
  std::string msg = error_message([&] { prepare_dataset({missing, dir.file("out"), 0.1, "byte", 1000}); });
  EXPECT_THAT(msg, HasSubstr(missing));
  EXPECT_THAT(msg, HasSubstr("does not exist"));

  const std::string empty = dir.file("empty.txt");
  write_bytes(empty, "", 0);
  msg = error_message([&] { prepare_dataset({empty, dir.file("out"), 0.1, "byte", 1000}); });
  EXPECT_THAT(msg, HasSubstr(empty));
  EXPECT_THAT(msg, HasSubstr("is empty"));
}

TEST(Prepare, RejectsBadOptions) {
  TempDir dir;
  write_bytes(dir.file("input.txt"), "hello", 5);
  EXPECT_THAT(error_message([&] { prepare_dataset({dir.file("input.txt"), dir.file("out"), 1.0, "byte", 10}); }),
              HasSubstr("val_fraction is 1"));
  EXPECT_THAT(error_message([&] { prepare_dataset({dir.file("input.txt"), dir.file("out"), 0.1, "bpe9", 10}); }),
              HasSubstr("bpe9"));
  EXPECT_THAT(error_message([&] { prepare_dataset({dir.file("input.txt"), dir.file("out"), 0.1, "byte", 0}); }),
              HasSubstr("shard_tokens is 0"));
  EXPECT_THAT(error_message([&] { prepare_dataset({dir.file("input.txt"), dir.file("out"), 0.95, "byte", 10}); }),
              HasSubstr("none left for training"));
}

}  // namespace
}  // namespace gpt
