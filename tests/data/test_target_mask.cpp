#include "data/target_mask.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "io/durable_file.h"
#include "test_util.h"

namespace gpt {
namespace {

using test::error_message;
using test::TempDir;
using ::testing::HasSubstr;

const std::vector<uint16_t> kTokens = {5, 1, 2, 5, 3, 4, 5};
const std::vector<uint8_t> kMask = {0, 0, 1, 1, 0, 1, 1};

// The bytes of a mask written for kTokens, to damage in memory.
std::string mask_bytes(const TempDir& dir) {
  write_mask(dir.file("m.mask"), kMask, kTokens, 0);
  return read_file_bytes(dir.file("m.mask"));
}

std::string read_error(const std::string& bytes) {
  return error_message([&] {
    std::vector<uint8_t> mask;
    read_mask(BinaryFile::in_memory(bytes, "m.mask", "target mask"), mask);
  });
}

void put_word(std::string& bytes, size_t index, uint32_t value) { std::memcpy(bytes.data() + 4 * index, &value, 4); }

TEST(TargetMask, RoundTrip) {
  TempDir dir;
  write_mask(dir.file("train_000000.bin.mask"), kMask, kTokens, 16);
  std::vector<uint8_t> mask;
  const MaskInfo info = read_mask(dir.file("train_000000.bin.mask"), mask);
  EXPECT_EQ(mask, kMask);
  EXPECT_EQ(info.num_tokens, kTokens.size());
  EXPECT_EQ(info.row_length, 16u);
  EXPECT_EQ(info.counted_tokens, 4u);
  EXPECT_EQ(info.shard_crc, shard_tokens_crc(kTokens));
  EXPECT_NE(info.shard_crc, shard_tokens_crc(std::vector<uint16_t>{5, 1, 2, 5, 3, 4, 6}));
  EXPECT_EQ(read_file_bytes(dir.file("train_000000.bin.mask")).size(), kMaskHeaderBytes + kTokens.size());
}

TEST(TargetMask, PathsSitNextToTheirShard) {
  EXPECT_EQ(mask_path_for("d/train_000003.bin"), "d/train_000003.bin.mask");
  EXPECT_TRUE(is_mask_path("d/train_000003.bin.mask"));
  EXPECT_FALSE(is_mask_path("d/train_000003.bin"));
}

TEST(TargetMask, WrongMagicOrVersion) {
  TempDir dir;
  std::string bytes = mask_bytes(dir);
  put_word(bytes, 0, 20240520);  // a token shard's magic: a shard given where its mask was expected
  EXPECT_THAT(read_error(bytes),
              HasSubstr("target mask m.mask has magic 20240520 at byte offset 0, expected 20241117"));
  bytes = mask_bytes(dir);
  put_word(bytes, 1, 2);
  EXPECT_THAT(read_error(bytes), HasSubstr("has version 2 at byte offset 4"));
}

TEST(TargetMask, SizeIsCheckedAgainstTheHeader) {
  TempDir dir;
  const std::string bytes = mask_bytes(dir);
  EXPECT_THAT(read_error(bytes.substr(0, 100)), HasSubstr("100 bytes, shorter than the 1024-byte header"));
  EXPECT_THAT(read_error(bytes.substr(0, bytes.size() - 2)), HasSubstr("2 bytes missing"));
  EXPECT_THAT(read_error(bytes + "x"), HasSubstr("1 bytes of trailing data"));
  std::string huge = bytes;
  put_word(huge, 2, 0xFFFFFFFFu);
  put_word(huge, 4, 0);
  EXPECT_THAT(read_error(huge), HasSubstr("4294967295 mask bytes"));
}

TEST(TargetMask, DamagedBytesAreFoundWithTheirOffset) {
  TempDir dir;
  std::string bytes = mask_bytes(dir);
  bytes[kMaskHeaderBytes + 3] = 7;
  EXPECT_THAT(read_error(bytes), HasSubstr("byte 7 at byte offset 1027 (token 3) is neither 0 nor 1"));
  bytes = mask_bytes(dir);
  bytes[kMaskHeaderBytes + 4] = 1;  // one more counted token than the header says
  EXPECT_THAT(read_error(bytes), HasSubstr("5 tokens are marked to count, but its header (byte offset 16) says 4"));
  bytes = mask_bytes(dir);
  std::swap(bytes[kMaskHeaderBytes + 1], bytes[kMaskHeaderBytes + 2]);  // same count, other tokens
  EXPECT_THAT(read_error(bytes), HasSubstr("CRC-32C"));
  bytes = mask_bytes(dir);
  put_word(bytes, 4, 8);
  EXPECT_THAT(read_error(bytes), HasSubstr("counts 8 target tokens, more than its 7 tokens"));
}

TEST(TargetMask, WriteRefusesMismatchedLengths) {
  TempDir dir;
  EXPECT_THAT(error_message([&] { write_mask(dir.file("m.mask"), kMask, std::vector<uint16_t>{1}, 0); }),
              HasSubstr("7 mask bytes for a shard of 1 tokens"));
}

}  // namespace
}  // namespace gpt
