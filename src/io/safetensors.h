// safetensors files (Hugging Face's format): an 8-byte little-endian header length N, N bytes of JSON
//   {"__metadata__": {"k": "v", ...}, "name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...}
// (padded with spaces), then the data section: every tensor's raw little-endian elements, row-major, at
// [begin, end) counted from the data section's start. The reader checks everything against the file's size
// before anything is allocated or read: the header length, the JSON, each tensor's dtype, shape, byte count
// and offsets, and that the tensors tile the data section exactly (no overlap, no gap, as the safetensors
// library itself requires). Errors name the file, the tensor and the byte offsets.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "io/binary_file.h"

namespace gpt {

// The safetensors library's own limit on the header: a larger one is refused before it is read.
inline constexpr uint64_t kSafetensorsMaxHeaderBytes = 100'000'000;

struct SafetensorsEntry {
  std::string name;
  std::string dtype;  // "F32", "F16", "BF16", "I64", ...: any dtype of the format; only floats are read
  size_t dtype_bytes = 0;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  // in the data section
  uint64_t numel() const;
};

struct SafetensorsHeader {
  uint64_t data_start = 0;  // 8 + N: where the data section begins in the file
  std::vector<SafetensorsEntry> tensors;  // in data offset order
  std::map<std::string, std::string> metadata;
  const SafetensorsEntry* find(std::string_view name) const;
};

// Parses and checks the header. prefix holds the file's first bytes (at least 8 + N, or the whole file
// when shorter); file_size is the whole file's; name is used in messages.
SafetensorsHeader parse_safetensors_header(std::string_view prefix, uint64_t file_size, const std::string& name);

// Reads a safetensors file from disk, or from memory (BinaryFile::in_memory: fuzzing and tests, with no
// file written and reopened per input); both run the same header checks and the same tensor reads.
class SafetensorsReader {
 public:
  explicit SafetensorsReader(const std::string& path);
  explicit SafetensorsReader(BinaryFile file);
  const std::string& path() const { return file_.path(); }
  const SafetensorsHeader& header() const { return header_; }
  // Reads an F32, F16 or BF16 tensor, widened exactly to FP32, into out (numel() floats); throws naming the
  // tensor for other dtypes or a short read.
  void read_f32(const SafetensorsEntry& entry, std::span<float> out) const;

 private:
  BinaryFile file_;
  SafetensorsHeader header_;
};

struct SafetensorsOutput {
  std::string name;
  std::vector<int64_t> shape;
  std::span<const float> data;
};

// Writes the tensors in the given order, each stored as dtype (F32, BF16 or F16: rounded to nearest even),
// with the header padded to a multiple of 8 bytes so every tensor is aligned; an atomic, durable
// replacement of path.
void write_safetensors(const std::string& path, std::span<const SafetensorsOutput> tensors,
                       const std::map<std::string, std::string>& metadata, const std::string& dtype = "F32");

}  // namespace gpt
