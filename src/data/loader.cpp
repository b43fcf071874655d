#include "data/loader.h"

#include <spdlog/spdlog.h>

#include <filesystem>
#include <numeric>
#include <utility>

#include "core/error.h"
#include "core/philox.h"
#include "data/shard.h"
#include "data/target_mask.h"

namespace gpt {

namespace {

// Philox stream id of the per-epoch shard order; shard i's sample order uses stream i.
constexpr uint32_t kShardOrderStream = 0xFFFFFFFFu;

class PhiloxWords {
 public:
  PhiloxWords(uint64_t seed, uint32_t stream, uint64_t epoch)
      : key0_(static_cast<uint32_t>(seed)),
        key1_(static_cast<uint32_t>(seed >> 32)),
        stream_(stream),
        epoch_lo_(static_cast<uint32_t>(epoch)),
        epoch_hi_(static_cast<uint32_t>(epoch >> 32)) {}

  uint32_t next() {
    if (used_ == 4) {
      block_ = philox4x32_10(Philox4{{counter_++, stream_, epoch_lo_, epoch_hi_}}, key0_, key1_);
      used_ = 0;
    }
    return block_.v[used_++];
  }

  // Uniform in [0, bound) with no modulo bias (Lemire, "Fast random integer generation in an interval", 2019):
  // the high word of word·bound, rejecting the few low words that would favour some results.
  uint32_t below(uint32_t bound) {
    uint64_t m = static_cast<uint64_t>(next()) * bound;
    auto low = static_cast<uint32_t>(m);
    if (low < bound) {
      const uint32_t threshold = (0u - bound) % bound;
      while (low < threshold) {
        m = static_cast<uint64_t>(next()) * bound;
        low = static_cast<uint32_t>(m);
      }
    }
    return static_cast<uint32_t>(m >> 32);
  }

 private:
  uint32_t key0_, key1_, stream_, epoch_lo_, epoch_hi_;
  uint32_t counter_ = 0;
  Philox4 block_{};
  int used_ = 4;
};

// Whether the shard has a target mask, after checking its header against the shard and T.
bool check_mask_header(const std::string& shard_path, uint64_t shard_tokens, int seq_len) {
  const std::string path = mask_path_for(shard_path);
  // A mask that cannot be looked for (a directory without search permission) must not read as "no mask",
  // which would train on the prompts.
  std::error_code ec;
  const bool exists = std::filesystem::exists(path, ec);
  GPT_CHECK(!ec, "cannot check for target mask {}: {}", path, ec.message());
  if (!exists) return false;
  const MaskInfo mask = read_mask_header(path);
  GPT_CHECK(mask.num_tokens == shard_tokens, "target mask {} covers {} tokens, but token shard {} holds {}", path,
            mask.num_tokens, shard_path, shard_tokens);
  GPT_CHECK(mask.row_length == 0 || mask.row_length == static_cast<uint32_t>(seq_len),
            "target mask {}: its examples were padded to rows of {} tokens (prepare --seq-len {}), but seq_len is {}; "
            "prepare the data again with --seq-len {}, or with --pack",
            path, mask.row_length, mask.row_length, seq_len, seq_len);
  return true;
}

}  // namespace

std::vector<uint32_t> seeded_permutation(uint32_t n, uint64_t seed, uint32_t stream, uint64_t epoch) {
  std::vector<uint32_t> order(n);
  std::iota(order.begin(), order.end(), 0u);
  PhiloxWords rng(seed, stream, epoch);
  for (uint32_t i = n; i > 1; --i) std::swap(order[i - 1], order[rng.below(i)]);
  return order;
}

DataLoader::DataLoader(const DataLoaderOptions& options) : options_(options) {
  GPT_CHECK(options.batch_size >= 1, "data loader: batch_size is {}, expected at least 1", options.batch_size);
  GPT_CHECK(options.seq_len >= 1, "data loader: seq_len is {}, expected at least 1", options.seq_len);
  GPT_CHECK(options.vocab_size >= 1 && options.vocab_size <= kShardMaxVocab,
            "data loader: vocab_size is {}, expected 1 to {} (uint16 token shards)", options.vocab_size,
            kShardMaxVocab);
  GPT_CHECK(options.world_size >= 1, "data loader: world_size is {}, expected at least 1", options.world_size);
  GPT_CHECK(options.rank >= 0 && options.rank < options.world_size, "data loader: rank {} is outside world size {}",
            options.rank, options.world_size);

  const auto window = static_cast<uint64_t>(options.seq_len) + 1;
  for (const std::string& path : expand_shard_glob(options.pattern)) {
    if (is_mask_path(path)) continue;
    const ShardInfo info = read_shard_header(path);
    const bool masked = check_mask_header(path, info.num_tokens, options.seq_len);
    if (info.num_tokens < window) {
      spdlog::warn("skipping token shard {}: {} tokens, fewer than one sample of seq_len + 1 = {}", path,
                   info.num_tokens, window);
      continue;
    }
    paths_.push_back(path);
    shard_tokens_.push_back(info.num_tokens);
    shard_masked_.push_back(masked ? 1 : 0);
    shard_samples_.push_back((info.num_tokens - 1) / static_cast<uint64_t>(options.seq_len));
    total_samples_ += shard_samples_.back();
  }
  // What a too-small data set can be met with; validation can also be left out.
  const std::string remedy = fmt::format("give {} more tokens or lower train.seq_len{}", options.key,
                                         options.key == "data.val" ? ", or set data.val: \"\" to train without validation" : "");
  GPT_CHECK(!paths_.empty(), "{}: no token shard matching {} holds one sample of seq_len + 1 = {} tokens: {}",
            options.key, options.pattern, window, remedy);
  GPT_CHECK(paths_.size() < kShardOrderStream, "too many token shards match {}", options.pattern);
  global_batch_ = static_cast<uint64_t>(options.world_size) * static_cast<uint64_t>(options.batch_size);
  GPT_CHECK(total_samples_ >= global_batch_,
            "{}: the {} token shard(s) matching {} hold {} samples of {} tokens, fewer than one global batch of {} "
            "(world_size {} × batch_size {}): lower train.batch_size, or {}",
            options.key, paths_.size(), options.pattern, total_samples_, window, global_batch_, options.world_size,
            options.batch_size, remedy);
  reset();
}

std::vector<uint32_t> DataLoader::shard_order(uint64_t epoch) const {
  const auto n = static_cast<uint32_t>(paths_.size());
  if (options_.shuffle) return seeded_permutation(n, options_.seed, kShardOrderStream, epoch);
  std::vector<uint32_t> order(n);
  std::iota(order.begin(), order.end(), 0u);
  return order;
}

void DataLoader::restore(const LoaderPosition& position) {
  GPT_CHECK(position.shard_cursor < paths_.size(),
            "cannot restore the data loader to shard {} of epoch {}: only {} token shard(s) match {}",
            position.shard_cursor, position.epoch, paths_.size(), options_.pattern);
  std::vector<uint32_t> order = shard_order(position.epoch);
  const uint32_t shard = order[position.shard_cursor];
  GPT_CHECK(position.sample_cursor <= shard_samples_[shard],
            "cannot restore the data loader to sample {} of token shard {}: it holds {} samples of {} tokens",
            position.sample_cursor, paths_[shard], shard_samples_[shard], options_.seq_len + 1);
  uint64_t consumed = position.sample_cursor;
  for (uint64_t i = 0; i < position.shard_cursor; ++i) consumed += shard_samples_[order[i]];

  epoch_ = position.epoch;
  shard_order_ = std::move(order);
  shard_cursor_ = position.shard_cursor;
  sample_cursor_ = position.sample_cursor;
  consumed_ = consumed;
}

void DataLoader::next_batch(std::span<int32_t> inputs, std::span<int32_t> targets) {
  const auto B = static_cast<uint64_t>(options_.batch_size);
  const auto T = static_cast<uint64_t>(options_.seq_len);
  GPT_CHECK(inputs.size() == B * T && targets.size() == B * T,
            "data loader: batch buffers hold {} inputs and {} targets, expected batch_size × seq_len = {}",
            inputs.size(), targets.size(), B * T);

  // A shard that fails to load leaves the loader where it was, not part-way through the batch.
  const LoaderPosition before = position();
  try {
    fill_batch(inputs, targets);
  } catch (...) {
    restore(before);
    throw;
  }
}

void DataLoader::fill_batch(std::span<int32_t> inputs, std::span<int32_t> targets) {
  const auto B = static_cast<uint64_t>(options_.batch_size);
  const auto T = static_cast<uint64_t>(options_.seq_len);
  if (total_samples_ - consumed_ < global_batch_) restore(LoaderPosition{epoch_ + 1, 0, 0});
  const uint64_t first = static_cast<uint64_t>(options_.rank) * B;
  for (uint64_t j = 0; j < global_batch_; ++j) {
    while (sample_cursor_ == shard_samples_[shard_order_[shard_cursor_]]) {
      ++shard_cursor_;
      sample_cursor_ = 0;
    }
    if (j >= first && j < first + B) {
      const uint32_t shard = shard_order_[shard_cursor_];
      const uint64_t sample = sample_in_shard(shard, sample_cursor_);
      load_shard(shard);
      const uint16_t* src = tokens_.data() + sample * T;
      int32_t* in = inputs.data() + (j - first) * T;
      int32_t* tg = targets.data() + (j - first) * T;
      for (uint64_t t = 0; t < T; ++t) {
        in[t] = src[t];
        tg[t] = src[t + 1];
      }
      if (!mask_.empty()) {
        const uint8_t* counted = mask_.data() + sample * T + 1;
        for (uint64_t t = 0; t < T; ++t)
          if (counted[t] == 0) tg[t] = -1;
      }
    }
    ++sample_cursor_;
    ++consumed_;
  }
}

uint64_t DataLoader::sample_in_shard(uint32_t shard, uint64_t cursor) {
  if (!options_.shuffle) return cursor;
  if (order_shard_ != shard || order_epoch_ != epoch_) {
    sample_order_ = seeded_permutation(static_cast<uint32_t>(shard_samples_[shard]), options_.seed, shard, epoch_);
    order_shard_ = shard;
    order_epoch_ = epoch_;
  }
  return sample_order_[cursor];
}

void DataLoader::load_shard(uint32_t shard) {
  if (loaded_shard_ == shard) return;
  loaded_shard_ = kNone;
  read_shard_tokens(paths_[shard], options_.vocab_size, tokens_);
  GPT_CHECK(tokens_.size() == shard_tokens_[shard],
            "token shard {} changed while in use: it now holds {} tokens, {} when the data loader opened it",
            paths_[shard], tokens_.size(), shard_tokens_[shard]);
  mask_.clear();
  if (shard_masked_[shard]) {
    const MaskInfo mask = read_mask(mask_path_for(paths_[shard]), mask_);
    GPT_CHECK(mask.num_tokens == tokens_.size(),
              "target mask {} changed while in use: it now covers {} tokens, its token shard holds {}", mask.path,
              mask.num_tokens, tokens_.size());
    GPT_CHECK(mask.shard_crc == shard_tokens_crc(tokens_),
              "target mask {} was written for other tokens than token shard {} holds (CRC-32C {:08x} in the mask, "
              "{:08x} of the shard): the shard was rewritten without its mask; run gpt-train prepare again",
              mask.path, paths_[shard], mask.shard_crc, shard_tokens_crc(tokens_));
  }
  loaded_shard_ = shard;
  spdlog::debug("data loader rank {}: loaded token shard {} ({} tokens)", options_.rank, paths_[shard], tokens_.size());
}

}  // namespace gpt
