// Shared test helpers: tiny model configs, per-test temporary directories, error capture.
#pragma once

#include "config/config.h"
#include "core/error.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <string>

#include <unistd.h>

namespace gpt::test {

inline ModelConfig tiny_model(int vocab = 11, int layers = 2, int channels = 8, int heads = 2, int context = 8) {
  ModelConfig m;
  m.vocab_size = vocab;
  m.vocab_pad_multiple = 8;
  m.context_length = context;
  m.n_layer = layers;
  m.n_head = heads;
  m.n_embd = channels;
  m.dropout = 0.0;
  return m;
}

// temp_directory_path()/gpt_tests_<pid>_<suite>_<test>, created empty and removed with its contents.
class TempDir {
 public:
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = std::filesystem::temp_directory_path() /
            ("gpt_tests_" + std::to_string(::getpid()) + "_" + info->test_suite_name() + "_" + info->name());
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

inline void write_bytes(const std::string& path, const void* data, size_t size) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(size));
}

// step -> loss, from a run directory's metrics.jsonl. The loss is written in the shortest form that reads
// back to the same double, so equal values here are equal bits.
inline std::map<int64_t, double> logged_losses(const std::string& run_dir) {
  std::map<int64_t, double> out;
  std::ifstream in(run_dir + "/metrics.jsonl");
  static const std::regex kLine("\\{\"step\":([0-9]+),\"loss\":([^,]+),");
  std::string line;
  std::smatch m;
  while (std::getline(in, line))
    if (std::regex_search(line, m, kLine)) out[std::stoll(m[1].str())] = std::stod(m[2].str());
  return out;
}

// step -> the number `key` (grad_norm, lr, ...) of a run directory's metrics.jsonl, written, as
// logged_losses reads the loss, in the shortest form that reads back to the same double.
inline std::map<int64_t, double> logged_metric(const std::string& run_dir, const std::string& key) {
  std::map<int64_t, double> out;
  std::ifstream in(run_dir + "/metrics.jsonl");
  const std::regex line_of("\\{\"step\":([0-9]+),(.*,)?\"" + key + "\":([^,}]+)");
  std::string line;
  std::smatch m;
  while (std::getline(in, line))
    if (std::regex_search(line, m, line_of)) out[std::stoll(m[1].str())] = std::stod(m[3].str());
  return out;
}

// The message of the gpt::Error that f throws; records a failure when it throws none.
template <class F>
std::string error_message(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a gpt::Error";
  return {};
}

}  // namespace gpt::test
