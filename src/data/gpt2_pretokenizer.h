// GPT-2's pre-tokeniser: splits text into the pieces that byte-level BPE then merges within, exactly as
// GPT-2's regex does,
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// written out as a matcher over code points instead of a regex engine (see gpt2_pretokenizer.cpp for how
// each alternative and the lookahead's backtracking are resolved). Letters, numbers and white space are
// Unicode's: general categories L* and N*, and the White_Space property (ICU's tables).
//
// Invalid UTF-8: each maximal ill-formed subsequence (Unicode's "maximal subpart", ICU's U8_NEXT) is one
// unit of class "other", so the pieces are those of the text decoded with U+FFFD replacement (a symbol,
// also "other"), and the bytes themselves still travel to the byte-level BPE: nothing is lost or replaced.
#pragma once

#include <cstddef>
#include <string_view>

namespace gpt {

class Gpt2PreTokenizer {
 public:
  explicit Gpt2PreTokenizer(std::string_view text) : text_(text) {}

  // The next piece (never empty); false at the end of the text.
  bool next(std::string_view& piece);

 private:
  std::string_view text_;
  size_t pos_ = 0;
};

}  // namespace gpt
