// Reading the binary files of the static kernel checks (cubin_opcodes.cpp, fatbin_split.cpp): a whole
// file, and little-endian fields at byte offsets, each read checked against the file's end.
#pragma once

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

namespace gpt::static_check {

inline std::vector<unsigned char> read_file(const char* path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(std::string("cannot open ") + path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The T at `offset`; `what` names it in the error when the file ends before it.
template <typename T>
T read_at(const std::vector<unsigned char>& bytes, std::uint64_t offset, const std::string& what) {
  if (offset > bytes.size() || bytes.size() - offset < sizeof(T))
    throw std::runtime_error(what + " at byte " + std::to_string(offset) + " lies past the end of the file (" +
                             std::to_string(bytes.size()) + " bytes)");
  T value;
  std::memcpy(&value, bytes.data() + offset, sizeof(T));
  return value;
}

}  // namespace gpt::static_check
