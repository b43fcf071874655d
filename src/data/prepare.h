// `gpt-train prepare`: tokenize one text file into llm.c token shards. The last val_fraction of the tokens
// become the validation split, so validation text is one contiguous stretch the model never trains on.
//
// format "jsonl": instruction data (instruction_data.h), one example per line; the last val_fraction of the
// examples are the validation split, and each shard gets a target mask next to it (target_mask.h) that
// leaves the prompts and the padding out of the loss. Examples are padded to rows of seq_len tokens, one
// example per row, or with pack, packed back to back.
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
  std::string format = "text";  // "text" or "jsonl"
  // jsonl only:
  bool pack = false;      // pack examples back to back instead of padding one per row
  int seq_len = 0;        // padding: the row length, the T the model trains with
  bool skip_bad = false;  // leave out bad lines (reported) instead of stopping at the first
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
  // jsonl only: every shard has "<shard>.mask"; the examples kept, the lines left out, the tokens whose
  // targets count (train and val), and the end-of-text tokens added as padding.
  bool masked = false;
  uint64_t examples = 0;
  uint64_t bad_lines = 0;
  uint64_t too_long_examples = 0;
  uint64_t counted_tokens = 0;
  uint64_t padding_tokens = 0;
};

// val gets round(val_fraction * tokens) tokens (jsonl: examples). Shards of earlier runs in out_dir that this run does not
// rewrite (train_NNNNNN.bin / val_NNNNNN.bin and their .mask files) are removed, so a glob over out_dir sees only this dataset.
PrepareResult prepare_dataset(const PrepareOptions& options);

}  // namespace gpt
