// The one reader every sized binary format goes through: claims are compared with the file's size in
// overflow-checked arithmetic, and reads past the end fail naming the file.
#include "io/binary_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <array>
#include <cstdint>
#include <filesystem>
#include <limits>

#include "test_util.h"

namespace gpt {
namespace {

using test::error_message;
using test::TempDir;
using test::write_bytes;
using ::testing::HasSubstr;

TEST(ClaimedSize, SumsProductsAndDetectsOverflow) {
  EXPECT_EQ(ClaimedSize().add({1024}).add({10, 2}).bytes(), 1044u);
  EXPECT_EQ(ClaimedSize().bytes(), 0u);
  EXPECT_EQ(ClaimedSize().add({0, std::numeric_limits<uint64_t>::max()}).bytes(), 0u);
  constexpr uint64_t k = 2147483647;
  EXPECT_FALSE(ClaimedSize().add({k, 12, k, k, 4}).bytes().has_value()) << "a product past 2^64";
  EXPECT_FALSE(ClaimedSize().add({std::numeric_limits<uint64_t>::max()}).add({1}).bytes().has_value()) << "a sum";
  EXPECT_FALSE(ClaimedSize().add({uint64_t{1} << 63, 2}).add({0}).bytes().has_value()) << "stays overflowed";
}

TEST(BinaryFile, RequireSizeSaysWhatTheHeaderClaimsAndWhatTheFileHolds) {
  TempDir dir;
  const std::string path = dir.file("x.bin");
  const std::array<char, 10> bytes{};
  write_bytes(path, bytes.data(), bytes.size());
  const BinaryFile file = BinaryFile::open(path, "widget file");
  EXPECT_EQ(file.size(), 10u);
  EXPECT_EQ(file.label(), "widget file " + path);
  file.require_size(10, "ten bytes");
  file.require_at_least(4, "four bytes");
  EXPECT_THAT(error_message([&] { file.require_size(12, "the 4-byte header and 4 items of 2 bytes"); }),
              HasSubstr("widget file " + path + ": its header claims the 4-byte header and 4 items of 2 bytes, 12 "
                        "bytes in all, but the file holds 10 bytes (2 bytes missing: truncated, or the header is "
                        "damaged)"));
  EXPECT_THAT(error_message([&] { file.require_size(7, "seven bytes"); }),
              HasSubstr("claims seven bytes, 7 bytes in all, but the file holds 10 bytes (3 bytes of trailing data)"));
  EXPECT_THAT(error_message([&] { file.require_at_least(std::nullopt, "2^40 items of 2^30 bytes"); }),
              HasSubstr("claims 2^40 items of 2^30 bytes, more than 2^64 bytes in all, but the file holds 10 bytes"));
}

TEST(BinaryFile, ReadsFromDiskAndMemoryAndNotPastTheEnd) {
  TempDir dir;
  const std::string path = dir.file("x.bin");
  const std::array<uint16_t, 4> values{1, 2, 3, 65535};
  write_bytes(path, values.data(), sizeof(values));
  const std::string memory(reinterpret_cast<const char*>(values.data()), sizeof(values));
  for (const BinaryFile& file : {BinaryFile::open(path, "shard"), BinaryFile::in_memory(memory, "mem", "shard")}) {
    std::array<uint16_t, 2> out{};
    file.read_into(4, std::span(out));
    EXPECT_EQ(out, (std::array<uint16_t, 2>{3, 65535}));
    EXPECT_THAT(error_message([&] { file.read_into(6, std::span(out)); }),
                HasSubstr(file.label() + ": 4 bytes at offset 6 are past its end (8 bytes)"));
    EXPECT_THAT(error_message([&] { file.read_into(std::numeric_limits<uint64_t>::max(), std::span(out)); }),
                HasSubstr("past its end"));
  }
}

// An empty shard reads zero tokens into an empty vector, whose data() is null: found by fuzz_token_shard
// under UBSan (memcpy's arguments must not be null even for 0 bytes); tests/fuzz/token_shard/empty.bin.
TEST(BinaryFile, AnEmptyReadOfAnEmptyFileIsFine) {
  const BinaryFile file = BinaryFile::in_memory({}, "empty", "shard");
  std::span<std::byte> nothing;
  file.read(0, nothing);
  EXPECT_THAT(error_message([&] { file.read(1, nothing); }), HasSubstr("0 bytes at offset 1 are past its end"));
}

TEST(BinaryFile, OpenNamesWhatIsWrongWithThePath) {
  TempDir dir;
  EXPECT_THAT(error_message([&] { BinaryFile::open(dir.file("none.bin"), "token shard"); }),
              HasSubstr("token shard " + dir.file("none.bin") + " does not exist"));
  EXPECT_THAT(error_message([&] { BinaryFile::open(dir.path().string(), "token shard"); }),
              HasSubstr("is not a regular file"));
  // A FIFO must fail the same way at once, not wait for a writer.
  ASSERT_EQ(::mkfifo(dir.file("fifo").c_str(), 0600), 0);
  EXPECT_THAT(error_message([&] { BinaryFile::open(dir.file("fifo"), "model file"); }),
              HasSubstr("model file " + dir.file("fifo") + " is not a regular file"));
}

}  // namespace
}  // namespace gpt
