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
  EXPECT_THAT(msg, HasSubstr("its header claims the 1024-byte header and 1000 tokens of 2 bytes, 3024 bytes in all, "
                             "but the file holds 2524 bytes (500 bytes missing"));
}

TEST(Shard, TrailingDataIsReported) {
  TempDir dir;
  const std::string path = dir.file("long.bin");
  write_raw_shard(path, kShardMagic, 1, 10, 21);
  const std::string msg = error_message([&] { read_shard_header(path); });
  EXPECT_THAT(msg, HasSubstr(path));
  EXPECT_THAT(msg, HasSubstr("its header claims the 1024-byte header and 10 tokens of 2 bytes, 1044 bytes in all, "
                             "but the file holds 1045 bytes (1 bytes of trailing data)"));
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
  EXPECT_THAT(msg, HasSubstr("token 300 at index 17 (byte offset 1058) is ≥ vocab size 256"));

  tokens[17] = 256;
  tokens[30] = 255;
  write_shard(path, tokens);
  EXPECT_THAT(error_message([&] { read_shard(path, 256); }), HasSubstr("token 256 at index 17"));
  tokens[17] = 255;
  write_shard(path, tokens);
  EXPECT_EQ(read_shard(path, 256), tokens);
}

TEST(Shard, ReadsFromMemoryLikeFromDisk) {
  const std::vector<uint16_t> tokens{5, 0, 255, 9};
  std::vector<char> bytes(kShardHeaderBytes + 2 * tokens.size(), 0);
  const std::array<int32_t, 3> header{kShardMagic, kShardVersion, static_cast<int32_t>(tokens.size())};
  std::memcpy(bytes.data(), header.data(), sizeof(header));
  std::memcpy(bytes.data() + kShardHeaderBytes, tokens.data(), 2 * tokens.size());
  const BinaryFile file = BinaryFile::in_memory({bytes.data(), bytes.size()}, "mem.bin", "token shard");
  EXPECT_EQ(read_shard(file, 256), tokens);
  EXPECT_THAT(error_message([&] { read_shard(file, 200); }),
              HasSubstr("token shard mem.bin: token 255 at index 2 (byte offset 1028) is ≥ vocab size 200"));
}

// A 1 KiB file whose header claims 2^31 - 1 tokens (4 GiB) is refused before the token buffer grows.
TEST(Shard, HugeClaimFailsBeforeAllocating) {
  TempDir dir;
  const std::string path = dir.file("huge.bin");
  write_raw_shard(path, kShardMagic, 1, 2147483647, 0);
  std::vector<uint16_t> tokens;
  const std::string msg = error_message([&] { read_shard_tokens(path, 256, tokens); });
  EXPECT_THAT(msg, HasSubstr(path));
  EXPECT_THAT(msg, HasSubstr("its header claims the 1024-byte header and 2147483647 tokens of 2 bytes, 4294968318 "
                             "bytes in all, but the file holds 1024 bytes"));
  EXPECT_EQ(tokens.capacity(), 0u);
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
