#include "data/shard.h"

#include "io/durable_file.h"

#include <glob.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include "core/error.h"

namespace gpt {

// Headers and tokens are read and written as raw memory; every machine this trainer targets is little-endian.
static_assert(std::endian::native == std::endian::little, "token shards are little-endian; add byte swapping");

namespace fs = std::filesystem;

namespace {

std::ifstream open_shard(const std::string& path) {
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  GPT_CHECK(fs::exists(status), "token shard {} does not exist", path);
  GPT_CHECK(fs::is_regular_file(status), "token shard {} is not a regular file", path);
  std::ifstream in(path, std::ios::binary);
  GPT_CHECK(in.is_open(), "cannot open token shard {}: {}", path, std::strerror(errno));
  return in;
}

void check_vocab_size(int vocab_size) {
  GPT_CHECK(vocab_size >= 1 && vocab_size <= kShardMaxVocab,
            "vocab size {} cannot be stored in a token shard (uint16 ids need 1 ≤ vocab size ≤ {})", vocab_size,
            kShardMaxVocab);
}

}  // namespace

ShardInfo read_shard_header(const std::string& path) {
  std::ifstream in = open_shard(path);
  const uint64_t file_bytes = fs::file_size(path);
  GPT_CHECK(file_bytes >= kShardHeaderBytes, "token shard {} is {} bytes, shorter than the {}-byte header", path,
            file_bytes, kShardHeaderBytes);
  std::array<int32_t, kShardHeaderInts> header{};
  in.read(reinterpret_cast<char*>(header.data()), kShardHeaderBytes);
  GPT_CHECK(in.gcount() == static_cast<std::streamsize>(kShardHeaderBytes),
            "token shard {}: could not read its {}-byte header", path, kShardHeaderBytes);
  GPT_CHECK(header[0] == kShardMagic, "token shard {} has magic {}, expected {} (llm.c token shard)", path,
            header[0], kShardMagic);
  GPT_CHECK(header[1] == kShardVersion, "token shard {} has version {}, only version {} is supported", path,
            header[1], kShardVersion);
  GPT_CHECK(header[2] >= 0, "token shard {} has a negative token count {} in its header", path, header[2]);
  const uint64_t num_tokens = static_cast<uint64_t>(header[2]);
  const uint64_t expected = num_tokens * sizeof(uint16_t);
  const uint64_t actual = file_bytes - kShardHeaderBytes;
  GPT_CHECK(actual >= expected, "token shard {}: header says {} tokens ({} bytes) but only {} bytes follow", path,
            num_tokens, expected, actual);
  GPT_CHECK(actual == expected,
            "token shard {}: header says {} tokens ({} bytes) but {} bytes follow; the file has trailing data", path,
            num_tokens, expected, actual);
  return ShardInfo{path, num_tokens, file_bytes};
}

void read_shard_tokens(const std::string& path, int vocab_size, std::vector<uint16_t>& tokens) {
  check_vocab_size(vocab_size);
  const ShardInfo info = read_shard_header(path);
  std::ifstream in = open_shard(path);
  in.seekg(static_cast<std::streamoff>(kShardHeaderBytes));
  tokens.resize(info.num_tokens);
  const auto bytes = static_cast<std::streamsize>(info.num_tokens * sizeof(uint16_t));
  in.read(reinterpret_cast<char*>(tokens.data()), bytes);
  GPT_CHECK(in.gcount() == bytes, "token shard {}: read {} of its {} token bytes; did the file change while reading?",
            path, in.gcount(), bytes);
  const auto limit = static_cast<uint32_t>(vocab_size);
  const auto bad = std::find_if(tokens.begin(), tokens.end(), [limit](uint16_t t) { return t >= limit; });
  GPT_CHECK(bad == tokens.end(), "token shard {}: token {} at index {} is ≥ vocab size {}", path, *bad,
            bad - tokens.begin(), vocab_size);
}

std::vector<uint16_t> read_shard(const std::string& path, int vocab_size) {
  std::vector<uint16_t> tokens;
  read_shard_tokens(path, vocab_size, tokens);
  return tokens;
}

void write_shard(const std::string& path, std::span<const uint16_t> tokens) {
  GPT_CHECK(tokens.size() <= static_cast<size_t>(std::numeric_limits<int32_t>::max()),
            "cannot write token shard {}: {} tokens exceed the int32 count of the llm.c header", path, tokens.size());
  std::array<int32_t, kShardHeaderInts> header{};
  header[0] = kShardMagic;
  header[1] = kShardVersion;
  header[2] = static_cast<int32_t>(tokens.size());

  replace_file_durably(path, {std::as_bytes(std::span(header)), std::as_bytes(tokens)});
}

std::vector<std::string> expand_shard_glob(const std::string& pattern) {
  GPT_CHECK(!pattern.empty(), "the token shard pattern is empty");
  glob_t matches{};
  const int rc = ::glob(pattern.c_str(), 0, nullptr, &matches);
  std::vector<std::string> paths;
  if (rc == 0) paths.assign(matches.gl_pathv, matches.gl_pathv + matches.gl_pathc);
  ::globfree(&matches);
  GPT_CHECK(rc != GLOB_NOMATCH, "no token shards match {}", pattern);
  GPT_CHECK(rc == 0, "cannot expand token shard pattern {}: {}", pattern,
            rc == GLOB_NOSPACE ? "out of memory" : "a directory could not be read");
  // glob(3) sorts by the locale's collation; sort bytewise so every machine sees the same shard order.
  std::sort(paths.begin(), paths.end());
  return paths;
}

}  // namespace gpt
