// replace_file_durably: the file is either the old one or the whole new one.
#include "io/durable_file.h"

#include "test_util.h"

#include <gtest/gtest.h>

#include <filesystem>

namespace gpt::test {
namespace {

std::span<const std::byte> bytes_of(std::string_view s) { return std::as_bytes(std::span(s.data(), s.size())); }

TEST(ReplaceFileDurably, WritesThePartsInOrder) {
  TempDir dir;
  const std::string path = dir.file("f.bin");
  write_bytes(path, "old", 3);
  const FileDigest d = replace_file_durably(path, {bytes_of("head"), bytes_of(""), bytes_of("tail")});
  EXPECT_EQ(read_file_bytes(path), "headtail");
  EXPECT_EQ(d.bytes, 8u);
  EXPECT_EQ(d.crc32c, digest_file(path).crc32c);
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
}

// The temporary cannot be created (a directory holds its name): the error names it and the old file stays.
TEST(ReplaceFileDurably, AFailedWriteLeavesTheOldFile) {
  TempDir dir;
  const std::string path = dir.file("f.bin");
  write_bytes(path, "old", 3);
  std::filesystem::create_directory(path + ".tmp");
  const std::string msg = error_message([&] { replace_file_durably(path, {bytes_of("new")}); });
  EXPECT_NE(msg.find("f.bin.tmp"), std::string::npos) << msg;
  EXPECT_EQ(read_file_bytes(path), "old");
}

}  // namespace
}  // namespace gpt::test
