// Files that are on stable storage when the call returns, for checkpoints: write, fsync, and fsync the
// directory that names them. Every failure (ENOSPC, EROFS, EACCES, EIO, a parent that is a regular
// file, ...) throws gpt::Error naming the path and the system's reason.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>

namespace gpt {

struct FileDigest {
  uint64_t bytes = 0;
  uint32_t crc32c = 0;
};

// Creates or truncates path, writes data, fsyncs and closes it; returns its size and CRC-32C.
FileDigest write_file_durably(const std::string& path, std::span<const std::byte> data);
FileDigest write_file_durably(const std::string& path, std::string_view text);

// Writes the parts, concatenated, to path as one atomic replacement: into path + ".tmp", fsynced, renamed
// over path, the directory fsynced. On any failure the temporary is removed and an existing path is left
// as it was, so a reader sees the old file or the whole new one, never a torn one.
FileDigest replace_file_durably(const std::string& path, std::initializer_list<std::span<const std::byte>> parts);

// Reads the whole file for its size and CRC-32C. sync additionally fsyncs it, for files another
// writer produced (the llm.c model file).
FileDigest digest_file(const std::string& path, bool sync = false);

// fsync of a directory, so the names created, renamed or removed in it survive a power loss.
void fsync_directory(const std::string& path);

// The whole file as bytes; throws naming the path when it cannot be read.
std::string read_file_bytes(const std::string& path);

}  // namespace gpt
