#include "train/metrics.h"

#include "core/error.h"

#include <cmath>

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

MetricsWriter::MetricsWriter(const std::string& path) : path_(path), out_(path, std::ios::app) {
  GPT_CHECK(out_.good(), "cannot open metrics file '{}' for appending", path);
}

void MetricsWriter::write(const JsonLine& line) {
  out_ << line.str() << '\n';
  out_.flush();
  GPT_CHECK(out_.good(), "writing to metrics file '{}' failed", path_);
}

}  // namespace gpt
