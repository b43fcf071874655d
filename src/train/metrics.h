// metrics.jsonl: one JSON object per line (training steps, validation losses, samples), appended and
// flushed as they happen so a crashed run keeps everything up to its last step.
#pragma once

#include <cstdint>
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
  // Appends to path (a resumed run continues the same file). Each line goes to the kernel at once (one
  // write(2)), so a crash of the process loses nothing written; failures name the system's reason.
  explicit MetricsWriter(const std::string& path);
  ~MetricsWriter();
  MetricsWriter(const MetricsWriter&) = delete;
  MetricsWriter& operator=(const MetricsWriter&) = delete;
  void write(const JsonLine& line);

 private:
  std::string path_;
  int fd_ = -1;
};

}  // namespace gpt
