#include "io/binary_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "core/error.h"

namespace gpt {

ClaimedSize& ClaimedSize::add(std::initializer_list<uint64_t> factors) {
  uint64_t part = 1;
  for (const uint64_t f : factors) overflowed_ = overflowed_ || __builtin_mul_overflow(part, f, &part);
  overflowed_ = overflowed_ || __builtin_add_overflow(bytes_, part, &bytes_);
  return *this;
}

BinaryFile::BinaryFile(std::string path, std::string label, uint64_t size, int fd, std::string_view memory)
    : path_(std::move(path)), label_(std::move(label)), size_(size), fd_(fd), memory_(memory) {}

BinaryFile BinaryFile::open(const std::string& path, std::string_view kind) {
  std::string label = fmt::format("{} {}", kind, path);
  // O_NONBLOCK: opening a FIFO given by mistake must fail the regular-file check below, not wait for a writer.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    const int err = errno;
    GPT_CHECK(err != ENOENT, "{} does not exist", label);
    GPT_FAIL("cannot open {}: {}", label, std::strerror(err));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    GPT_FAIL("cannot stat {}: {}", label, std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    GPT_FAIL("{} is not a regular file", label);
  }
  return BinaryFile(path, std::move(label), static_cast<uint64_t>(st.st_size), fd, {});
}

BinaryFile BinaryFile::in_memory(std::string_view bytes, std::string name, std::string_view kind) {
  std::string label = fmt::format("{} {}", kind, name);
  return BinaryFile(std::move(name), std::move(label), bytes.size(), -1, bytes);
}

BinaryFile::BinaryFile(BinaryFile&& other) noexcept
    : path_(std::move(other.path_)),
      label_(std::move(other.label_)),
      size_(other.size_),
      fd_(std::exchange(other.fd_, -1)),
      memory_(other.memory_) {}

BinaryFile& BinaryFile::operator=(BinaryFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    path_ = std::move(other.path_);
    label_ = std::move(other.label_);
    size_ = other.size_;
    fd_ = std::exchange(other.fd_, -1);
    memory_ = other.memory_;
  }
  return *this;
}

BinaryFile::~BinaryFile() {
  if (fd_ >= 0) ::close(fd_);
}

void BinaryFile::require_size(std::optional<uint64_t> claimed, std::string_view claim) const {
  require_at_least(claimed, claim);
  GPT_CHECK(size_ == *claimed,
            "{}: its header claims {}, {} bytes in all, but the file holds {} bytes ({} bytes of trailing data)",
            label_, claim, *claimed, size_, size_ - *claimed);
}

void BinaryFile::require_at_least(std::optional<uint64_t> claimed, std::string_view claim) const {
  GPT_CHECK(claimed.has_value(),
            "{}: its header claims {}, more than 2^64 bytes in all, but the file holds {} bytes; the header is damaged",
            label_, claim, size_);
  GPT_CHECK(size_ >= *claimed,
            "{}: its header claims {}, {} bytes in all, but the file holds {} bytes ({} bytes missing: truncated, or "
            "the header is damaged)",
            label_, claim, *claimed, size_, *claimed - size_);
}

void BinaryFile::read(uint64_t offset, std::span<std::byte> out) const {
  GPT_CHECK(offset <= size_ && out.size() <= size_ - offset,
            "{}: {} bytes at offset {} are past its end ({} bytes)", label_, out.size(), offset, size_);
  if (out.empty()) return;  // an empty span's data() may be null, which memcpy must not get
  if (fd_ < 0) {
    std::memcpy(out.data(), memory_.data() + offset, out.size());
    return;
  }
  size_t done = 0;
  while (done < out.size()) {
    const ssize_t n = ::pread(fd_, out.data() + done, out.size() - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    GPT_CHECK(n >= 0, "cannot read {} at byte offset {}: {}", label_, offset + done, std::strerror(errno));
    GPT_CHECK(n > 0, "{}: read {} of {} bytes at offset {}; did the file change while reading?", label_, done,
              out.size(), offset);
    done += static_cast<size_t>(n);
  }
}

}  // namespace gpt
