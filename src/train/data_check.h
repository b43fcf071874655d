// What can be checked of the data before step 1. The loader checks every shard's header when it is built,
// but a token id only when its shard is loaded, which may be hours into a run; so the ids of every shard are
// read at start too, when that is cheap.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gpt {

// Throws when the glob of config key `key` (data.train, data.val) matches no file, naming the key, the
// directory searched (relative paths are relative to the working directory) and how to make shards.
void require_shards(const std::string& key, const std::string& pattern);

// Reads all of a run's shards up to this many bytes in all (a second or two from the page cache).
inline constexpr uint64_t kStartTokenCheckBytes = uint64_t{512} << 20;

// Checks every token id of the shards against vocab_size when they hold at most max_bytes together,
// throwing naming the shard, index and id of the first bad one; larger data is left to the loader, which
// checks each shard as it loads it. Returns whether the ids were checked.
bool check_shard_tokens(const std::vector<std::string>& paths, int vocab_size, uint64_t max_bytes);

}  // namespace gpt
