#include "data/shard.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "test_util.h"

namespace gpt {
namespace {

using test::error_message;
using test::TempDir;
using test::write_bytes;
using ::testing::HasSubstr;

// A raw shard file: the given header words, then `data_bytes` bytes of zeros.
void write_raw_shard(const std::string& path, int32_t magic, int32_t version, int32_t count, size_t data_bytes) {
  std::vector<char> bytes(kShardHeaderBytes + data_bytes, 0);
  const std::array<int32_t, 3> header{magic, version, count};
  std::memcpy(bytes.data(), header.data(), sizeof(header));
  write_bytes(path, bytes.data(), bytes.size());
}

TEST(Shard, RoundTripsTokens) {
  TempDir dir;
  const std::string path = dir.file("train_000000.bin");
  std::vector<uint16_t> tokens{0, 1, 65535, 42, 50256, 7, 0};
  write_shard(path, tokens);
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));

  const ShardInfo info = read_shard_header(path);
  EXPECT_EQ(info.path, path);
  EXPECT_EQ(info.num_tokens, tokens.size());
  EXPECT_EQ(info.file_bytes, kShardHeaderBytes + 2 * tokens.size());
  EXPECT_EQ(read_shard(path, 65536), tokens);
}

TEST(Shard, RoundTripsAnEmptyShardAndReusesTheBuffer) {
  TempDir dir;
  const std::string path = dir.file("empty.bin");
  write_shard(path, {});
  EXPECT_EQ(read_shard_header(path).num_tokens, 0u);
  std::vector<uint16_t> tokens{1, 2, 3};
  read_shard_tokens(path, 256, tokens);
  EXPECT_TRUE(tokens.empty());
}

TEST(Shard, HeaderIsTheLlmcLayout) {
  TempDir dir;
  const std::string path = dir.file("s.bin");
  const std::vector<uint16_t> tokens{5, 6, 7};
  write_shard(path, tokens);
  std::ifstream in(path, std::ios::binary);
  std::array<int32_t, 256> header{};
  in.read(reinterpret_cast<char*>(header.data()), sizeof(header));
  EXPECT_EQ(header[0], 20240520);
  EXPECT_EQ(header[1], 1);
  EXPECT_EQ(header[2], 3);
  for (size_t i = 3; i < header.size(); ++i) EXPECT_EQ(header[i], 0) << i;
}

TEST(Shard, MissingFileIsNamed) {
  TempDir dir;
  const std::string path = dir.file("nope.bin");
  const std::string msg = error_message([&] { read_shard(path, 256); });
  EXPECT_THAT(msg, HasSubstr(path));
  EXPECT_THAT(msg, HasSubstr("does not exist"));
}

TEST(Shard, TruncatedHeaderIsReported) {
  TempDir dir;
  const std::string path = dir.file("short.bin");
  const std::vector<char> bytes(100, 0);
  write_bytes(path, bytes.data(), bytes.size());
  const std::string msg = error_message([&] { read_shard_header(path); });
  EXPECT_THAT(msg, HasSubstr(path));
  EXPECT_THAT(msg, HasSubstr("is 100 bytes, shorter than the 1024-byte header"));
}

TEST(Shard, WrongMagicIsReported) {
  TempDir dir;
  const std::string path = dir.file("magic.bin");
  write_raw_shard(path, 12345, 1, 0, 0);
  const std::string msg = error_message([&] { read_shard(path, 256); });
  EXPECT_THAT(msg, HasSubstr(path));
  EXPECT_THAT(msg, HasSubstr("has magic 12345, expected 20240520 (llm.c token shard)"));
}

TEST(Shard, UnsupportedVersionIsReported) {
  TempDir dir;
  const std::string path = dir.file("version.bin");
  write_raw_shard(path, kShardMagic, 2, 0, 0);
  const std::string msg = error_message([&] { read_shard_header(path); });
  EXPECT_THAT(msg, HasSubstr(path));
  EXPECT_THAT(msg, HasSubstr("has version 2, only version 1 is supported"));
}

TEST(Shard, TruncatedDataIsReported) {
  TempDir dir;
  const std::string path = dir.file("truncated.bin");
  write_raw_shard(path, kShardMagic, 1, 1000, 1500);
  const std::string msg = error_message([&] { read_shard(path, 256); });
  EXPECT_THAT(msg, HasSubstr(path));
  EXPECT_THAT(msg, HasSubstr("header says 1000 tokens (2000 bytes) but only 1500 bytes follow"));
}

TEST(Shard, TrailingDataIsReported) {
  TempDir dir;
  const std::string path = dir.file("long.bin");
  write_raw_shard(path, kShardMagic, 1, 10, 21);
  const std::string msg = error_message([&] { read_shard_header(path); });
  EXPECT_THAT(msg, HasSubstr(path));
  EXPECT_THAT(msg, HasSubstr("header says 10 tokens (20 bytes) but 21 bytes follow"));
}

TEST(Shard, TokenAtOrAboveVocabIsReported) {
  TempDir dir;
  const std::string path = dir.file("vocab.bin");
  std::vector<uint16_t> tokens(40, 3);
  tokens[17] = 300;
  tokens[30] = 400;
  write_shard(path, tokens);
  const std::string msg = error_message([&] { read_shard(path, 256); });
  EXPECT_THAT(msg, HasSubstr(path));
  EXPECT_THAT(msg, HasSubstr("token 300 at index 17 is ≥ vocab size 256"));

  tokens[17] = 256;
  tokens[30] = 255;
  write_shard(path, tokens);
  EXPECT_THAT(error_message([&] { read_shard(path, 256); }), HasSubstr("token 256 at index 17"));
  tokens[17] = 255;
  write_shard(path, tokens);
  EXPECT_EQ(read_shard(path, 256), tokens);
}

TEST(Shard, GlobExpandsSorted) {
  TempDir dir;
  for (const char* name : {"train_000002.bin", "train_000000.bin", "train_000001.bin", "val_000000.bin"})
    write_shard(dir.file(name), std::vector<uint16_t>{1});
  const std::vector<std::string> paths = expand_shard_glob(dir.file("train_*.bin"));
  EXPECT_EQ(paths, (std::vector<std::string>{dir.file("train_000000.bin"), dir.file("train_000001.bin"),
                                             dir.file("train_000002.bin")}));
  EXPECT_EQ(expand_shard_glob(dir.file("val_000000.bin")), std::vector<std::string>{dir.file("val_000000.bin")});
}

TEST(Shard, GlobWithoutMatchNamesThePattern) {
  TempDir dir;
  const std::string pattern = dir.file("test_*.bin");
  const std::string msg = error_message([&] { expand_shard_glob(pattern); });
  EXPECT_THAT(msg, HasSubstr(pattern));
}

}  // namespace
}  // namespace gpt
