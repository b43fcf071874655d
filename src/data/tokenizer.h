// Tokenizers turn text into token ids and back. The byte tokenizer (id i is byte i) needs no vocabulary
// file and is what the demo trains on; GPT-2's BPE implements the same interface.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace gpt {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  virtual std::string name() const = 0;
  virtual int vocab_size() const = 0;
  // The token that separates documents (llm.c's <|endoftext|>).
  virtual int eot_token() const = 0;
  virtual std::vector<int> encode(std::string_view text) const = 0;
  // Throws when a token is outside [0, vocab_size).
  virtual std::string decode(std::span<const int> tokens) const = 0;
};

// Byte i <-> token i; vocabulary 256; documents end with '\n'.
class ByteTokenizer final : public Tokenizer {
 public:
  std::string name() const override { return "byte"; }
  int vocab_size() const override { return 256; }
  int eot_token() const override { return '\n'; }
  std::vector<int> encode(std::string_view text) const override;
  std::string decode(std::span<const int> tokens) const override;
};

// Names: "byte", "gpt2" (files in path, or default_gpt2_tokenizer_dir() when path is empty; the byte
// tokenizer takes no path). Throws listing the choices for any other name.
std::unique_ptr<Tokenizer> make_tokenizer(const std::string& name, const std::string& path = "");

}  // namespace gpt
