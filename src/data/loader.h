// DataLoader: micro-batches of B sequences of T tokens from llm.c token shards.
//
// A sample is a window of T+1 tokens; shard windows start at 0, T, 2T, ... (llm.c), so a shard of n tokens
// holds (n-1)/T samples. Each epoch defines one global stream of samples: the shards in epoch order, each
// shard's samples in shard order. Global batch k is stream entries [k·W·B, (k+1)·W·B) for world size W,
// and rank r takes entries [r·B, (r+1)·B) of it, so ranks see disjoint samples whose union is what one
// rank with batch W·B sees. A batch may span shards; the samples left over at the end of an epoch (fewer
// than W·B) are dropped.
//
// shuffle=true (training): each epoch visits the shards in a seeded random order and each shard's samples
// in a seeded random order, both Fisher–Yates over Philox keyed by (seed, epoch, shard), so the order is
// the same on every machine and standard library. shuffle=false (validation): shards and samples in order.
//
// Only one shard is held in memory; a rank loads a shard only when one of its own samples lies in it.
//
// Target masks (target_mask.h): a shard with a "<shard>.mask" file next to it yields target -1 wherever the
// mask of the target token is 0 (instruction data's prompts and padding); a shard without one counts every
// target. Mask files matched by the pattern are not taken for shards. A mask whose examples were padded to
// rows of R tokens is only valid with seq_len R, whose windows start where its rows do.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace gpt {

struct DataLoaderOptions {
  std::string pattern;  // glob(3) pattern of token shards
  int batch_size = 0;   // B, per rank
  int seq_len = 0;      // T
  int vocab_size = 0;   // token ids are checked against it when a shard is loaded
  bool shuffle = false;
  uint64_t seed = 0;
  int rank = 0;
  int world_size = 1;
  std::string key = "data.train";  // the config key pattern came from, which errors name
};

// Where the next global batch starts: the same on every rank, and independent of B and world size, so a
// run may resume with a different layout and still continue the sample stream where it stopped.
struct LoaderPosition {
  uint64_t epoch = 0;
  uint64_t shard_cursor = 0;   // index into this epoch's shard order
  uint64_t sample_cursor = 0;  // index into that shard's sample order
  bool operator==(const LoaderPosition&) const = default;
};

class DataLoader {
 public:
  // Expands the pattern and checks every shard header. Shards with fewer than T+1 tokens are skipped with a
  // warning; throws when none remain or all together hold less than one global batch.
  explicit DataLoader(const DataLoaderOptions& options);

  // Fills inputs[b*T + t] and targets[b*T + t] (the token after the input), both of size B*T.
  void next_batch(std::span<int32_t> inputs, std::span<int32_t> targets);

  void reset() { restore(LoaderPosition{}); }
  LoaderPosition position() const { return LoaderPosition{epoch_, shard_cursor_, sample_cursor_}; }
  // Throws when the position does not exist for these shards and T.
  void restore(const LoaderPosition& position);

  uint64_t num_samples() const { return total_samples_; }                     // per epoch, all ranks
  uint64_t batches_per_epoch() const { return total_samples_ / global_batch_; }
  const std::vector<std::string>& shard_paths() const { return paths_; }     // shards in use, sorted
  const DataLoaderOptions& options() const { return options_; }

 private:
  std::vector<uint32_t> shard_order(uint64_t epoch) const;
  void fill_batch(std::span<int32_t> inputs, std::span<int32_t> targets);
  uint64_t sample_in_shard(uint32_t shard, uint64_t cursor);
  void load_shard(uint32_t shard);

  DataLoaderOptions options_;
  std::vector<std::string> paths_;
  std::vector<uint64_t> shard_tokens_;
  std::vector<uint64_t> shard_samples_;
  std::vector<uint8_t> shard_masked_;  // whether shard i has a target mask
  uint64_t total_samples_ = 0;
  uint64_t global_batch_ = 0;

  uint64_t epoch_ = 0;
  std::vector<uint32_t> shard_order_;
  uint64_t shard_cursor_ = 0;
  uint64_t sample_cursor_ = 0;
  uint64_t consumed_ = 0;  // samples of this epoch's stream already passed, by all ranks

  static constexpr uint64_t kNone = ~uint64_t{0};
  uint64_t loaded_shard_ = kNone;
  std::vector<uint16_t> tokens_;
  std::vector<uint8_t> mask_;  // the loaded shard's target mask; empty when it has none
  uint64_t order_shard_ = kNone;
  uint64_t order_epoch_ = kNone;
  std::vector<uint32_t> sample_order_;
};

// A permutation of 0..n-1 by Fisher–Yates, drawing from Philox4x32-10 keyed by seed with the counter
// holding (stream, epoch); identical on every platform.
std::vector<uint32_t> seeded_permutation(uint32_t n, uint64_t seed, uint32_t stream, uint64_t epoch);

}  // namespace gpt
