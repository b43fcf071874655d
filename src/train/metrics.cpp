#include "train/metrics.h"

#include "core/error.h"

#include <cerrno>
#include <cmath>
#include <cstring>

#include <fcntl.h>
#include <unistd.h>

namespace gpt {

std::string json_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 2);
  for (unsigned char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        // A byte-level model can emit any byte, including broken UTF-8: control bytes and bytes
        // >= 0x80 are written as the code point of the same value, so every line stays valid JSON.
        if (c < 0x20 || c >= 0x80) out += fmt::format("\\u{:04x}", c);
        else out += static_cast<char>(c);
    }
  }
  return out;
}

void JsonLine::key(std::string_view k) {
  if (!body_.empty()) body_ += ",";
  body_ += "\"" + json_escape(k) + "\":";
}

JsonLine& JsonLine::add(std::string_view k, int64_t value) {
  key(k);
  body_ += std::to_string(value);
  return *this;
}

JsonLine& JsonLine::add(std::string_view k, double value) {
  key(k);
  body_ += std::isfinite(value) ? fmt::format("{}", value) : "null";
  return *this;
}

JsonLine& JsonLine::add(std::string_view k, std::string_view value) {
  key(k);
  body_ += "\"" + json_escape(value) + "\"";
  return *this;
}

MetricsWriter::MetricsWriter(const std::string& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  GPT_CHECK(fd_ >= 0, "cannot open metrics file '{}' for appending: {}", path, std::strerror(errno));
}

MetricsWriter::~MetricsWriter() {
  if (fd_ >= 0) ::close(fd_);
}

void MetricsWriter::write(const JsonLine& line) {
  const std::string text = line.str() + "\n";
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd_, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    GPT_CHECK(n > 0, "writing to metrics file '{}' failed: {}", path_, n < 0 ? std::strerror(errno) : "nothing written");
    done += static_cast<size_t>(n);
  }
}

}  // namespace gpt
