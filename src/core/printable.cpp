#include "core/printable.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <cstdint>
#include <regex>

namespace gpt {
namespace {

// The length of the valid UTF-8 sequence at text[i] that is not a C1 control, or 0.
size_t utf8_length(std::string_view text, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char b = byte(i);
  size_t n = 0;
  uint32_t cp = 0;
  if (b >= 0xc2 && b <= 0xdf) n = 2, cp = b & 0x1f;
  else if (b >= 0xe0 && b <= 0xef) n = 3, cp = b & 0x0f;
  else if (b >= 0xf0 && b <= 0xf4) n = 4, cp = b & 0x07;
  else return 0;
  if (i + n > text.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((byte(i + k) & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (byte(i + k) & 0x3f);
  }
  // Overlong forms, surrogates and code points past U+10FFFF are malformed; C1 controls are controls.
  if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) || (cp >= 0xd800 && cp <= 0xdfff) ||
      cp < 0xa0)
    return 0;
  return n;
}

}  // namespace

std::string printable(std::string_view text, bool keep_newlines) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const auto b = static_cast<unsigned char>(text[i]);
    if ((b >= 0x20 && b < 0x7f) || (keep_newlines && (b == '\n' || b == '\t'))) {
      out += static_cast<char>(b);
      ++i;
    } else if (const size_t n = b >= 0x80 ? utf8_length(text, i) : 0; n > 0) {
      out.append(text.substr(i, n));
      i += n;
    } else {
      out += fmt::format("\\x{:02x}", b);
      ++i;
    }
  }
  return out;
}

std::string without_source_locations(std::string_view message) {
  static const std::regex kLocation(R"( \([^()\s]+\.(cpp|h|cu|cuh):[0-9]+\))");
  return std::regex_replace(std::string(message), kLocation, "");
}

std::string message_for_log(std::string_view message) {
  return printable(spdlog::get_level() <= spdlog::level::debug ? std::string(message) : without_source_locations(message));
}

}  // namespace gpt
