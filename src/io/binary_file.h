// Binary files whose headers state sizes (llm.c model files, token shards, optimizer state): read by offset,
// from disk or from memory (tests and fuzzing), with every size a header claims checked against the bytes the
// file holds before anything is allocated from it. A hostile or damaged header can claim any count; the file's
// own size is the one number it cannot fake, so a reader that allocates only after require_size() allocates at
// most what is on disk.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace gpt {

// A byte count a header implies, a sum of products (count x bytes each) in overflow-checked arithmetic: a
// header of int32 or int64 fields can claim more than 2^64 bytes, which must read as "more than any file
// holds", not wrap around to a small number that happens to match.
class ClaimedSize {
 public:
  // Adds the product of the factors: add({num_tokens, 2}), add({L, 12, C, C, 4}).
  ClaimedSize& add(std::initializer_list<uint64_t> factors);
  // nullopt when the parts overflowed 64 bits.
  std::optional<uint64_t> bytes() const { return overflowed_ ? std::nullopt : std::optional<uint64_t>(bytes_); }

 private:
  uint64_t bytes_ = 0;
  bool overflowed_ = false;
};

class BinaryFile {
 public:
  // kind names the file in messages ("model file", "token shard"); throws when path is missing, not a regular
  // file or unreadable.
  static BinaryFile open(const std::string& path, std::string_view kind);
  // The bytes, which must outlive the BinaryFile, read as if they were the file `name`.
  static BinaryFile in_memory(std::string_view bytes, std::string name, std::string_view kind);

  BinaryFile(BinaryFile&& other) noexcept;
  BinaryFile& operator=(BinaryFile&& other) noexcept;
  BinaryFile(const BinaryFile&) = delete;
  BinaryFile& operator=(const BinaryFile&) = delete;
  ~BinaryFile();

  const std::string& path() const { return path_; }
  // "model file <path>": the prefix of this file's messages.
  const std::string& label() const { return label_; }
  uint64_t size() const { return size_; }

  // Throws unless the file holds exactly `claimed` bytes, naming the file, what the header claims (`claim`
  // says what adds up to it: "the 1024-byte header and 10 tokens of 2 bytes"), the bytes the file holds
  // and whether it is short or has trailing data. nullopt (an overflowed claim) always throws.
  void require_size(std::optional<uint64_t> claimed, std::string_view claim) const;
  // The same for a prefix the file must hold at least (a header and a table that give the rest's size).
  void require_at_least(std::optional<uint64_t> claimed, std::string_view claim) const;

  // Copies out.size() bytes from offset; throws naming the file when they are not all there (a file that
  // shrank after require_size).
  void read(uint64_t offset, std::span<std::byte> out) const;
  template <class T, size_t Extent>
  void read_into(uint64_t offset, std::span<T, Extent> out) const {
    read(offset, std::as_writable_bytes(out));
  }

 private:
  BinaryFile(std::string path, std::string label, uint64_t size, int fd, std::string_view memory);

  std::string path_;
  std::string label_;
  uint64_t size_ = 0;
  int fd_ = -1;               // a file on disk, read with pread
  std::string_view memory_;  // or bytes in memory
};

}  // namespace gpt
