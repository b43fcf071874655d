#include "data/tokenizer.h"

#include "core/error.h"
#include "data/gpt2_tokenizer.h"

namespace gpt {

std::vector<int> ByteTokenizer::encode(std::string_view text) const {
  std::vector<int> tokens(text.size());
  for (size_t i = 0; i < text.size(); ++i) tokens[i] = static_cast<unsigned char>(text[i]);
  return tokens;
}

std::string ByteTokenizer::decode(std::span<const int> tokens) const {
  std::string text(tokens.size(), '\0');
  for (size_t i = 0; i < tokens.size(); ++i) {
    GPT_CHECK(tokens[i] >= 0 && tokens[i] < 256, "byte tokenizer cannot decode token {} at index {}: ids are 0..255",
              tokens[i], i);
    text[i] = static_cast<char>(static_cast<unsigned char>(tokens[i]));
  }
  return text;
}

std::unique_ptr<Tokenizer> make_tokenizer(const std::string& name, const std::string& path) {
  if (name == "byte") return std::make_unique<ByteTokenizer>();
  if (name == "gpt2") return std::make_unique<Gpt2Tokenizer>(path);
  GPT_FAIL("unknown tokenizer \"{}\"; choices: byte, gpt2", name);
}

}  // namespace gpt
