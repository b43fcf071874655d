#include "io/durable_file.h"

#include "core/error.h"
#include "io/crc32c.h"

#include <cerrno>
#include <cstring>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace gpt {
namespace {

// Closes the descriptor on every path out, including a throw.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  // close(2) reports deferred write errors (NFS, some FUSE filesystems); they must not be lost.
  int release_and_close() {
    const int fd = fd_;
    fd_ = -1;
    return ::close(fd);
  }

 private:
  int fd_;
};

std::string reason(int err) {
  std::string r = std::strerror(err);
  if (err == ENOSPC || err == EDQUOT) r += " (the disk or quota is full)";
  if (err == EFBIG) r += " (the file size limit, ulimit -f, was reached)";
  return r;
}

}  // namespace

namespace {

// Creates or truncates path, writes the parts one after the other, fsyncs and closes it.
FileDigest write_parts_durably(const std::string& path, std::span<const std::span<const std::byte>> parts) {
  Fd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  GPT_CHECK(fd.get() >= 0, "cannot create '{}': {}", path, reason(errno));
  uint64_t total = 0;
  for (const auto& part : parts) total += part.size();
  FileDigest digest;
  for (const auto& part : parts) {
    const auto* p = reinterpret_cast<const char*>(part.data());
    size_t left = part.size();
    while (left > 0) {
      const ssize_t n = ::write(fd.get(), p, left);
      if (n < 0 && errno == EINTR) continue;
      GPT_CHECK(n > 0, "writing '{}' failed after {} of {} bytes: {}", path, digest.bytes + part.size() - left, total,
                reason(n < 0 ? errno : ENOSPC));
      p += n;
      left -= static_cast<size_t>(n);
    }
    digest.bytes += part.size();
    digest.crc32c = crc32c(part.data(), part.size(), digest.crc32c);
  }
  GPT_CHECK(::fsync(fd.get()) == 0, "cannot flush '{}' to disk (fsync): {}", path, reason(errno));
  GPT_CHECK(fd.release_and_close() == 0, "closing '{}' failed: {}", path, reason(errno));
  return digest;
}

}  // namespace

FileDigest write_file_durably(const std::string& path, std::span<const std::byte> data) {
  return write_parts_durably(path, std::span(&data, 1));
}

FileDigest replace_file_durably(const std::string& path, std::initializer_list<std::span<const std::byte>> parts) {
  const std::string tmp = path + ".tmp";
  try {
    const FileDigest digest = write_parts_durably(tmp, std::span(parts.begin(), parts.size()));
    GPT_CHECK(::rename(tmp.c_str(), path.c_str()) == 0, "cannot rename '{}' to '{}': {}", tmp, path, reason(errno));
    const std::string::size_type slash = path.find_last_of('/');
    fsync_directory(slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash));
    return digest;
  } catch (const Error&) {
    ::unlink(tmp.c_str());  // an existing `path` was never touched
    throw;
  }
}

FileDigest write_file_durably(const std::string& path, std::string_view text) {
  return write_file_durably(path, std::as_bytes(std::span(text.data(), text.size())));
}

FileDigest digest_file(const std::string& path, bool sync) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  GPT_CHECK(fd.get() >= 0, "cannot open '{}': {}", path, reason(errno));
  struct stat st {};
  GPT_CHECK(::fstat(fd.get(), &st) == 0, "cannot stat '{}': {}", path, reason(errno));
  GPT_CHECK(S_ISREG(st.st_mode), "'{}' is not a regular file", path);
  std::vector<char> buffer(size_t{1} << 20);
  FileDigest d;
  for (;;) {
    const ssize_t n = ::read(fd.get(), buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) continue;
    GPT_CHECK(n >= 0, "reading '{}' failed after {} bytes: {}", path, d.bytes, reason(errno));
    if (n == 0) break;
    d.crc32c = crc32c(buffer.data(), static_cast<size_t>(n), d.crc32c);
    d.bytes += static_cast<uint64_t>(n);
  }
  if (sync) GPT_CHECK(::fsync(fd.get()) == 0, "cannot flush '{}' to disk (fsync): {}", path, reason(errno));
  return d;
}

void fsync_directory(const std::string& path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  GPT_CHECK(fd.get() >= 0, "cannot open directory '{}': {}", path, reason(errno));
  // Some filesystems do not support fsync on directories (EINVAL); there is nothing more to do on them.
  GPT_CHECK(::fsync(fd.get()) == 0 || errno == EINVAL, "cannot flush directory '{}' to disk (fsync): {}", path,
            reason(errno));
}

std::string read_file_bytes(const std::string& path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  GPT_CHECK(fd.get() >= 0, "cannot open '{}': {}", path, reason(errno));
  struct stat st {};
  GPT_CHECK(::fstat(fd.get(), &st) == 0, "cannot stat '{}': {}", path, reason(errno));
  GPT_CHECK(S_ISREG(st.st_mode), "'{}' is not a regular file", path);
  std::string out;
  char buffer[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd.get(), buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    GPT_CHECK(n >= 0, "reading '{}' failed after {} bytes: {}", path, out.size(), reason(errno));
    if (n == 0) break;
    out.append(buffer, static_cast<size_t>(n));
  }
  return out;
}

}  // namespace gpt
