#include "train/data_check.h"

#include "core/error.h"
#include "data/shard.h"
#include "memory/recompute.h"

#include <spdlog/spdlog.h>

#include <filesystem>

#include <glob.h>

namespace gpt {

void require_shards(const std::string& key, const std::string& pattern) {
  glob_t matches{};
  const int rc = ::glob(pattern.c_str(), 0, nullptr, &matches);
  ::globfree(&matches);
  if (rc != GLOB_NOMATCH) return;
  namespace fs = std::filesystem;
  const fs::path folder = fs::path(pattern).parent_path();
  std::error_code ec;
  const fs::path searched = fs::absolute(folder.empty() ? fs::path(".") : folder, ec);
  GPT_FAIL("{}: no file matches '{}' (searched '{}'{}{}); make token shards with gpt-train prepare --input FILE.txt "
           "--out {} (scripts/demo.sh makes the demo's), or point {} at existing ones",
           key, pattern, searched.string(), fs::is_directory(searched, ec) ? "" : ", which does not exist",
           fs::path(pattern).is_relative() ? ", relative to the working directory " + fs::current_path(ec).string() : "",
           folder.empty() ? "." : folder.string(), key);
}

bool check_shard_tokens(const std::vector<std::string>& paths, int vocab_size, uint64_t max_bytes) {
  uint64_t bytes = 0;
  for (const std::string& path : paths) bytes += read_shard_header(path).file_bytes;
  if (bytes > max_bytes) {
    spdlog::info("token ids of the {} shard(s) ({}) are checked as each shard loads; the start check reads at most {}",
                 paths.size(), format_bytes(bytes), format_bytes(max_bytes));
    return false;
  }
  std::vector<uint16_t> tokens;
  for (const std::string& path : paths) read_shard_tokens(path, vocab_size, tokens);
  spdlog::debug("token ids of {} shard(s) ({}) are below model.vocab_size {}", paths.size(), format_bytes(bytes),
                vocab_size);
  return true;
}

}  // namespace gpt
