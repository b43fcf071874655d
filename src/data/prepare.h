// `gpt-train prepare`: tokenize one text file into llm.c token shards. The last val_fraction of the tokens
// become the validation split, so validation text is one contiguous stretch the model never trains on.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace gpt {

struct PrepareOptions {
  std::string input;
  std::string out_dir;
  double val_fraction = 0.1;
  std::string tokenizer = "byte";
  size_t shard_tokens = 100'000'000;
  std::string tokenizer_path;  // gpt2: the files' directory (empty: the default)
  // The text is tokenised in pieces of about this many bytes, so progress can be shown; the pieces are cut
  // only where the tokens come out the same as for the whole text.
  size_t tokenize_chunk_bytes = 1 << 20;
};

struct PrepareResult {
  std::string tokenizer;
  int vocab_size = 0;
  uint64_t text_bytes = 0;
  uint64_t train_tokens = 0;
  uint64_t val_tokens = 0;
  std::vector<std::string> train_shards;  // out_dir/train_000000.bin, ...
  std::vector<std::string> val_shards;    // out_dir/val_000000.bin, ...; empty when val_fraction is 0
};

// val gets round(val_fraction * tokens) tokens. Shards of earlier runs in out_dir that this run does not
// rewrite (train_NNNNNN.bin / val_NNNNNN.bin) are removed, so a glob over out_dir sees only this dataset.
PrepareResult prepare_dataset(const PrepareOptions& options);

}  // namespace gpt
