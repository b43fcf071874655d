// metrics.jsonl: one JSON object per line (training steps, validation losses, samples), appended and
// flushed as they happen so a crashed run keeps everything up to its last step.
#pragma once

#include <cstdint>
#include <fstream>
#include <string>
#include <string_view>

namespace gpt {

std::string json_escape(std::string_view text);

// Builds one flat JSON object.
class JsonLine {
 public:
  JsonLine& add(std::string_view key, int64_t value);
  JsonLine& add(std::string_view key, double value);
  JsonLine& add(std::string_view key, std::string_view value);
  std::string str() const { return "{" + body_ + "}"; }

 private:
  void key(std::string_view k);
  std::string body_;
};

class MetricsWriter {
 public:
  // Appends to path (a resumed run continues the same file).
  explicit MetricsWriter(const std::string& path);
  void write(const JsonLine& line);

 private:
  std::string path_;
  std::ofstream out_;
};

}  // namespace gpt
