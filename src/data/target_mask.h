// Target masks: which tokens of a token shard count in the loss. Instruction data (prepare --format jsonl)
// trains on the completions only, so next to each token shard "<shard>" it writes "<shard>.mask": a header
// of 256 little-endian 32-bit words —
//   [0] magic 20241117, [1] version 1, [2] token count (the shard's), [3] row length: T when the examples
//   were padded to rows of T tokens (prepare --seq-len T), 0 when they were packed (prepare --pack),
//   [4] counted tokens (the mask bytes that are 1), [5] CRC-32C of the shard's token bytes, [6] CRC-32C of
//   the mask bytes —
// followed by one byte per token: 1 when the token counts as a target (it is predicted and in the loss), 0
// when it does not (prompt and padding tokens). The target of input position t is token t+1, so the loader
// yields target -1 where the mask of token t+1 is 0.
//
// The shard itself is unchanged, so llm.c-format readers, whose globs name "*.bin", never see the mask;
// given one by mistake they stop at its magic instead of training on it. Word [5] ties a mask to the very
// tokens it was written with: a shard re-prepared without its mask is caught, not trained on with another
// dataset's mask.
#pragma once

#include "io/binary_file.h"

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace gpt {

inline constexpr uint32_t kMaskMagic = 20241117;
inline constexpr uint32_t kMaskVersion = 1;
inline constexpr size_t kMaskHeaderWords = 256;
inline constexpr size_t kMaskHeaderBytes = kMaskHeaderWords * sizeof(uint32_t);
inline constexpr const char* kMaskSuffix = ".mask";

struct MaskInfo {
  std::string path;
  uint64_t num_tokens = 0;
  uint32_t row_length = 0;  // 0: packed
  uint64_t counted_tokens = 0;
  uint32_t shard_crc = 0;
  uint32_t mask_crc = 0;
};

// "<shard_path>.mask".
std::string mask_path_for(const std::string& shard_path);
bool is_mask_path(const std::string& path);

// CRC-32C of the tokens' little-endian bytes, as the header's word [5] holds it.
uint32_t shard_tokens_crc(std::span<const uint16_t> tokens);

BinaryFile open_mask(const std::string& path);

// Reads and checks the header: magic, version, and that the file holds exactly the bytes it announces.
MaskInfo read_mask_header(const BinaryFile& file);
MaskInfo read_mask_header(const std::string& path);

// Reads the mask bytes into `mask` (reusing its capacity) and checks them against the header: every byte 0
// or 1 (else naming the byte offset), the count of 1s and the CRC. Allocates only after the size matched.
MaskInfo read_mask(const BinaryFile& file, std::vector<uint8_t>& mask);
MaskInfo read_mask(const std::string& path, std::vector<uint8_t>& mask);

// Writes the mask of shard `tokens` (durably, as shards are written); mask and tokens have the same length.
void write_mask(const std::string& path, std::span<const uint8_t> mask, std::span<const uint16_t> tokens,
                uint32_t row_length);

}  // namespace gpt
