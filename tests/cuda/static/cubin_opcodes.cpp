// Counts the tensor-core and asynchronous-copy instructions in each kernel of a cubin, for toolkits
// without cuobjdump or nvdisasm (a compiler-only CUDA install, as in CI). Used by
// scripts/check_flash_kernels.sh.
//
// A cubin is an ELF64 file (e_machine EM_CUDA); each kernel's machine code is its section ".text.<mangled
// name>". From Volta on every SASS instruction is 16 bytes, and its opcode is the low 12 bits of the first
// little-endian 64-bit word (turingas's assembler grammar writes the codes this way). The codes counted:
//   0x23c  HMMA    tensor-core matrix multiply-accumulate (mma.sync m16n8k16 on sm_80 and sm_90)
//   0x83b  LDSM    ldmatrix
//   0xfae  LDGSTS  cp.async, global to shared
// They are not documented by NVIDIA, so the checking script first compiles tests/cuda/static/sass_probe.cu,
// whose kernels hold known numbers of each, and refuses to trust the table on a toolkit where those counts
// come out wrong.
//
//   cubin_opcodes FILE.cubin    prints "<mangled kernel> instructions N HMMA n LDSM n LDGSTS n" per kernel
#include <elf.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

#include "binary_file.h"

namespace {

using gpt::static_check::read_at;
using gpt::static_check::read_file;

constexpr std::uint64_t kInstructionBytes = 16;
constexpr std::uint64_t kOpcodeMask = 0xfff;

struct Counted {
  const char* name;
  std::uint64_t opcode;
};
constexpr Counted kCounted[] = {{"HMMA", 0x23c}, {"LDSM", 0x83b}, {"LDGSTS", 0xfae}};

void count_kernels(const char* path) {
  const std::vector<unsigned char> bytes = read_file(path);
  const auto header = read_at<Elf64_Ehdr>(bytes, 0, "ELF header");
  if (std::memcmp(header.e_ident, ELFMAG, SELFMAG) != 0 || header.e_ident[EI_CLASS] != ELFCLASS64 ||
      header.e_ident[EI_DATA] != ELFDATA2LSB || header.e_machine != EM_CUDA)
    throw std::runtime_error(std::string(path) + " is not a little-endian ELF64 CUDA cubin");
  if (header.e_shentsize != sizeof(Elf64_Shdr)) throw std::runtime_error("unexpected section header size");
  std::vector<Elf64_Shdr> sections;
  for (unsigned i = 0; i < header.e_shnum; ++i)
    sections.push_back(read_at<Elf64_Shdr>(bytes, header.e_shoff + std::uint64_t{i} * sizeof(Elf64_Shdr), "section header"));
  if (header.e_shstrndx >= sections.size()) throw std::runtime_error("section name table index out of range");
  const Elf64_Shdr& names = sections[header.e_shstrndx];
  const std::string prefix = ".text.";
  for (const Elf64_Shdr& section : sections) {
    if (section.sh_name >= names.sh_size) throw std::runtime_error("section name offset out of range");
    std::string name;
    for (std::uint64_t at = names.sh_offset + section.sh_name;; ++at) {
      const char c = read_at<char>(bytes, at, "section name");
      if (c == '\0') break;
      name += c;
    }
    if (name.rfind(prefix, 0) != 0) continue;
    if (section.sh_size % kInstructionBytes != 0)
      throw std::runtime_error(name + ": " + std::to_string(section.sh_size) + " bytes is not a whole number of 16-byte instructions");
    std::uint64_t counts[std::size(kCounted)] = {};
    for (std::uint64_t at = 0; at < section.sh_size; at += kInstructionBytes) {
      const auto opcode = read_at<std::uint64_t>(bytes, section.sh_offset + at, "instruction") & kOpcodeMask;
      for (std::size_t k = 0; k < std::size(kCounted); ++k) counts[k] += opcode == kCounted[k].opcode;
    }
    std::printf("%s instructions %llu", name.c_str() + prefix.size(),
                static_cast<unsigned long long>(section.sh_size / kInstructionBytes));
    for (std::size_t k = 0; k < std::size(kCounted); ++k)
      std::printf(" %s %llu", kCounted[k].name, static_cast<unsigned long long>(counts[k]));
    std::printf("\n");
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: cubin_opcodes FILE.cubin\n");
    return 2;
  }
  try {
    count_kernels(argv[1]);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cubin_opcodes: %s\n", e.what());
    return 1;
  }
  return 0;
}
