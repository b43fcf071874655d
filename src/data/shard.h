// llm.c token shards (karpathy/llm.c dev/data): a header of 256 little-endian int32 — [0] magic 20240520,
// [1] version 1, [2] token count — followed by that many uint16 token ids. Shards are written to
// "<path>.tmp" and renamed, so a reader never sees a half-written shard under its final name.
#pragma once

#include "io/binary_file.h"

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace gpt {

inline constexpr int32_t kShardMagic = 20240520;
inline constexpr int32_t kShardVersion = 1;
inline constexpr size_t kShardHeaderInts = 256;
inline constexpr size_t kShardHeaderBytes = kShardHeaderInts * sizeof(int32_t);
// Token ids are stored as uint16, so no vocabulary may be larger than this.
inline constexpr int kShardMaxVocab = 65536;

struct ShardInfo {
  std::string path;
  uint64_t num_tokens = 0;
  uint64_t file_bytes = 0;
};

BinaryFile open_shard(const std::string& path);

// Reads and checks the header only: magic, version, and that the file holds exactly the tokens it announces.
ShardInfo read_shard_header(const BinaryFile& file);
ShardInfo read_shard_header(const std::string& path);

// Reads all tokens into `tokens` (reusing its capacity) and checks each id is below vocab_size; allocates
// only after the file's size matched its header's token count.
void read_shard_tokens(const BinaryFile& file, int vocab_size, std::vector<uint16_t>& tokens);
void read_shard_tokens(const std::string& path, int vocab_size, std::vector<uint16_t>& tokens);
std::vector<uint16_t> read_shard(const BinaryFile& file, int vocab_size);
std::vector<uint16_t> read_shard(const std::string& path, int vocab_size);

void write_shard(const std::string& path, std::span<const uint16_t> tokens);

// glob(3) expansion, sorted bytewise; throws naming the pattern when nothing matches.
std::vector<std::string> expand_shard_glob(const std::string& pattern);

}  // namespace gpt
