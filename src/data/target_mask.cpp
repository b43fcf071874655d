#include "data/target_mask.h"

#include <algorithm>
#include <array>
#include <bit>
#include <limits>

#include "core/error.h"
#include "io/crc32c.h"
#include "io/durable_file.h"

namespace gpt {

static_assert(std::endian::native == std::endian::little, "target masks are little-endian; add byte swapping");

std::string mask_path_for(const std::string& shard_path) { return shard_path + kMaskSuffix; }

bool is_mask_path(const std::string& path) { return path.ends_with(kMaskSuffix); }

uint32_t shard_tokens_crc(std::span<const uint16_t> tokens) { return crc32c(tokens.data(), tokens.size_bytes()); }

BinaryFile open_mask(const std::string& path) { return BinaryFile::open(path, "target mask"); }

MaskInfo read_mask_header(const BinaryFile& file) {
  GPT_CHECK(file.size() >= kMaskHeaderBytes, "{} is {} bytes, shorter than the {}-byte header", file.label(),
            file.size(), kMaskHeaderBytes);
  std::array<uint32_t, kMaskHeaderWords> header{};
  file.read_into(0, std::span(header));
  GPT_CHECK(header[0] == kMaskMagic, "{} has magic {} at byte offset 0, expected {} (a gpt-train target mask)",
            file.label(), header[0], kMaskMagic);
  GPT_CHECK(header[1] == kMaskVersion, "{} has version {} at byte offset 4, only version {} is supported",
            file.label(), header[1], kMaskVersion);
  MaskInfo info{file.path(), header[2], header[3], header[4], header[5], header[6]};
  GPT_CHECK(info.counted_tokens <= info.num_tokens,
            "{}: its header (byte offset 16) counts {} target tokens, more than its {} tokens", file.label(),
            info.counted_tokens, info.num_tokens);
  file.require_size(ClaimedSize().add({kMaskHeaderBytes}).add({info.num_tokens, 1}).bytes(),
                    fmt::format("the {}-byte header and {} mask bytes", kMaskHeaderBytes, info.num_tokens));
  return info;
}

MaskInfo read_mask_header(const std::string& path) { return read_mask_header(open_mask(path)); }

MaskInfo read_mask(const BinaryFile& file, std::vector<uint8_t>& mask) {
  const MaskInfo info = read_mask_header(file);
  mask.resize(info.num_tokens);
  file.read_into(kMaskHeaderBytes, std::span(mask));
  const auto bad = std::find_if(mask.begin(), mask.end(), [](uint8_t m) { return m > 1; });
  GPT_CHECK(bad == mask.end(), "{}: byte {} at byte offset {} (token {}) is neither 0 nor 1", file.label(), *bad,
            kMaskHeaderBytes + static_cast<size_t>(bad - mask.begin()), bad - mask.begin());
  const auto counted = static_cast<uint64_t>(std::count(mask.begin(), mask.end(), uint8_t{1}));
  GPT_CHECK(counted == info.counted_tokens,
            "{}: {} tokens are marked to count, but its header (byte offset 16) says {}; the file is damaged",
            file.label(), counted, info.counted_tokens);
  const uint32_t crc = crc32c(mask.data(), mask.size());
  GPT_CHECK(crc == info.mask_crc,
            "{}: the mask bytes (from byte offset {}) have CRC-32C {:08x}, its header (byte offset 24) says {:08x}; "
            "the file is damaged",
            file.label(), kMaskHeaderBytes, crc, info.mask_crc);
  return info;
}

MaskInfo read_mask(const std::string& path, std::vector<uint8_t>& mask) { return read_mask(open_mask(path), mask); }

void write_mask(const std::string& path, std::span<const uint8_t> mask, std::span<const uint16_t> tokens,
                uint32_t row_length) {
  GPT_CHECK(mask.size() == tokens.size(), "cannot write target mask {}: {} mask bytes for a shard of {} tokens", path,
            mask.size(), tokens.size());
  GPT_CHECK(mask.size() <= std::numeric_limits<uint32_t>::max(),
            "cannot write target mask {}: {} tokens exceed its 32-bit count", path, mask.size());
  GPT_CHECK(std::all_of(mask.begin(), mask.end(), [](uint8_t m) { return m <= 1; }),
            "cannot write target mask {}: mask bytes must be 0 or 1", path);
  std::array<uint32_t, kMaskHeaderWords> header{};
  header[0] = kMaskMagic;
  header[1] = kMaskVersion;
  header[2] = static_cast<uint32_t>(mask.size());
  header[3] = row_length;
  header[4] = static_cast<uint32_t>(std::count(mask.begin(), mask.end(), uint8_t{1}));
  header[5] = shard_tokens_crc(tokens);
  header[6] = crc32c(mask.data(), mask.size());
  replace_file_durably(path, {std::as_bytes(std::span(header)), std::as_bytes(mask)});
}

}  // namespace gpt
