// Splits an uncompressed fatbin (nvcc -fatbin --compress-mode=none) into its parts: each cubin as
// DIR/sm_XX.cubin and each PTX text as DIR/compute_XX.ptx. Used by scripts/check_flash_kernels.sh, so that
// one nvcc compile gives the PTX, the machine code and ptxas's register report of a file; a compile to a
// fatbin goes through ccache (a --keep compile does not), so a check of unchanged kernels costs a lookup.
//
// The layout is not documented by NVIDIA; what this reads, as nvcc 13.0 writes it (little-endian):
//   container header, 16 bytes: u32 magic 0xBA55ED50, u16 version, u16 header size, u64 bytes after it;
//   then entries, each: u16 kind (1 PTX, 2 ELF cubin), u16 version, u32 entry header size, u64 payload
//   bytes (padded), ... u32 architecture (80 for sm_80) at +0x1c, u64 flags at +0x28 (0x2000 or 0x8000:
//   compressed, from older and newer toolkits), u64 uncompressed size at +0x38 (0 when not compressed);
//   the payload follows the entry header. PTX payloads end in zero padding, which is dropped.
// An entry of another kind, a compressed one, or a size that runs past the file is an error naming it.
//
//   fatbin_split FILE.fatbin DIR    prints one line per file written
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "binary_file.h"

namespace {

using gpt::static_check::read_at;
using gpt::static_check::read_file;

constexpr std::uint32_t kFatbinMagic = 0xBA55ED50;
constexpr std::uint16_t kKindPtx = 1;
constexpr std::uint16_t kKindCubin = 2;
constexpr std::uint64_t kCompressedFlags = 0x2000 | 0x8000;

void write_file(const std::string& path, const char* data, std::uint64_t size) {
  std::ofstream out(path, std::ios::binary);
  out.write(data, static_cast<std::streamsize>(size));
  if (!out) throw std::runtime_error("cannot write " + path);
  std::printf("%s %llu bytes\n", path.c_str(), static_cast<unsigned long long>(size));
}

void split(const char* path, const std::string& dir) {
  const std::vector<unsigned char> bytes = read_file(path);
  if (read_at<std::uint32_t>(bytes, 0, "fatbin magic") != kFatbinMagic)
    throw std::runtime_error(std::string(path) + " is not a fatbin (no magic 0xBA55ED50 at byte 0)");
  const std::uint64_t header_bytes = read_at<std::uint16_t>(bytes, 6, "fatbin header size");
  const std::uint64_t end = header_bytes + read_at<std::uint64_t>(bytes, 8, "fatbin size");
  if (end > bytes.size())
    throw std::runtime_error(std::string(path) + ": its header gives " + std::to_string(end) + " bytes, the file has " +
                             std::to_string(bytes.size()));
  int written = 0;
  for (std::uint64_t entry = header_bytes; entry < end;) {
    const std::string at = "entry at byte " + std::to_string(entry);
    const auto kind = read_at<std::uint16_t>(bytes, entry, at + ": kind");
    const std::uint64_t entry_header = read_at<std::uint32_t>(bytes, entry + 4, at + ": header size");
    const auto payload = read_at<std::uint64_t>(bytes, entry + 8, at + ": payload size");
    const auto arch = read_at<std::uint32_t>(bytes, entry + 0x1c, at + ": architecture");
    const auto flags = read_at<std::uint64_t>(bytes, entry + 0x28, at + ": flags");
    const auto uncompressed = read_at<std::uint64_t>(bytes, entry + 0x38, at + ": uncompressed size");
    const std::uint64_t start = entry + entry_header;
    if (start > end || end - start < payload)
      throw std::runtime_error(at + ": its " + std::to_string(payload) + " bytes run past the fatbin's end");
    if ((flags & kCompressedFlags) != 0 || uncompressed != 0)
      throw std::runtime_error(at + " (architecture " + std::to_string(arch) +
                               ") is compressed: compile with nvcc --compress-mode=none");
    const char* data = reinterpret_cast<const char*>(bytes.data()) + start;
    if (kind == kKindCubin) {
      write_file(dir + "/sm_" + std::to_string(arch) + ".cubin", data, payload);
    } else if (kind == kKindPtx) {
      std::uint64_t text = payload;
      while (text > 0 && data[text - 1] == '\0') --text;
      write_file(dir + "/compute_" + std::to_string(arch) + ".ptx", data, text);
    } else {
      throw std::runtime_error(at + " is of kind " + std::to_string(kind) + ", neither PTX (1) nor a cubin (2)");
    }
    ++written;
    entry = start + payload;
  }
  if (written == 0) throw std::runtime_error(std::string(path) + " holds no entries");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: fatbin_split FILE.fatbin DIR\n");
    return 2;
  }
  try {
    split(argv[1], argv[2]);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fatbin_split: %s\n", e.what());
    return 1;
  }
  return 0;
}
