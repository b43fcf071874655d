#include "train/data_check.h"

#include "data/shard.h"
#include "memory/recompute.h"

#include <spdlog/spdlog.h>

namespace gpt {

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
