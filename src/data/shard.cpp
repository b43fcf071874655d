#include "data/shard.h"

#include "io/durable_file.h"

#include <glob.h>

#include <algorithm>
#include <array>
#include <bit>
#include <limits>

#include "core/error.h"

namespace gpt {

// Headers and tokens are read and written as raw memory; every machine this trainer targets is little-endian.
static_assert(std::endian::native == std::endian::little, "token shards are little-endian; add byte swapping");

namespace {

void check_vocab_size(int vocab_size) {
  GPT_CHECK(vocab_size >= 1 && vocab_size <= kShardMaxVocab,
            "vocab size {} cannot be stored in a token shard (uint16 ids need 1 ≤ vocab size ≤ {})", vocab_size,
            kShardMaxVocab);
}

}  // namespace

BinaryFile open_shard(const std::string& path) { return BinaryFile::open(path, "token shard"); }

ShardInfo read_shard_header(const BinaryFile& file) {
  GPT_CHECK(file.size() >= kShardHeaderBytes, "{} is {} bytes, shorter than the {}-byte header", file.label(),
            file.size(), kShardHeaderBytes);
  std::array<int32_t, kShardHeaderInts> header{};
  file.read_into(0, std::span(header));
  GPT_CHECK(header[0] == kShardMagic, "{} has magic {}, expected {} (llm.c token shard)", file.label(), header[0],
            kShardMagic);
  GPT_CHECK(header[1] == kShardVersion, "{} has version {}, only version {} is supported", file.label(), header[1],
            kShardVersion);
  GPT_CHECK(header[2] >= 0, "{} has a negative token count {} in its header", file.label(), header[2]);
  const auto num_tokens = static_cast<uint64_t>(header[2]);
  file.require_size(ClaimedSize().add({kShardHeaderBytes}).add({num_tokens, sizeof(uint16_t)}).bytes(),
                    fmt::format("the {}-byte header and {} tokens of 2 bytes", kShardHeaderBytes, num_tokens));
  return ShardInfo{file.path(), num_tokens, file.size()};
}

ShardInfo read_shard_header(const std::string& path) { return read_shard_header(open_shard(path)); }

void read_shard_tokens(const BinaryFile& file, int vocab_size, std::vector<uint16_t>& tokens) {
  check_vocab_size(vocab_size);
  const ShardInfo info = read_shard_header(file);
  tokens.resize(info.num_tokens);
  file.read_into(kShardHeaderBytes, std::span(tokens));
  const auto limit = static_cast<uint32_t>(vocab_size);
  const auto bad = std::find_if(tokens.begin(), tokens.end(), [limit](uint16_t t) { return t >= limit; });
  GPT_CHECK(bad == tokens.end(), "{}: token {} at index {} (byte offset {}) is ≥ vocab size {}", file.label(), *bad,
            bad - tokens.begin(), kShardHeaderBytes + sizeof(uint16_t) * static_cast<size_t>(bad - tokens.begin()),
            vocab_size);
}

void read_shard_tokens(const std::string& path, int vocab_size, std::vector<uint16_t>& tokens) {
  read_shard_tokens(open_shard(path), vocab_size, tokens);
}

std::vector<uint16_t> read_shard(const BinaryFile& file, int vocab_size) {
  std::vector<uint16_t> tokens;
  read_shard_tokens(file, vocab_size, tokens);
  return tokens;
}

std::vector<uint16_t> read_shard(const std::string& path, int vocab_size) { return read_shard(open_shard(path), vocab_size); }

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
