#include "data/gpt2_pretokenizer.h"

#include <unicode/uchar.h>
#include <unicode/utf8.h>

#include <algorithm>
#include <array>
#include <cstdint>

namespace gpt {
namespace {

enum class CharClass : uint8_t { Letter, Number, Space, Other };

struct Unit {
  CharClass cls;
  size_t len;  // bytes
};

CharClass classify(UChar32 c) {
  if (c < 0) return CharClass::Other;  // ill-formed UTF-8
  const uint32_t mask = U_GET_GC_MASK(c);
  if (mask & U_GC_L_MASK) return CharClass::Letter;
  if (mask & U_GC_N_MASK) return CharClass::Number;
  if (u_isUWhiteSpace(c)) return CharClass::Space;
  return CharClass::Other;
}

// ASCII is most of most text: one table lookup instead of a call into ICU.
const std::array<CharClass, 128> kAscii = [] {
  std::array<CharClass, 128> table{};
  for (UChar32 c = 0; c < 128; ++c) table[static_cast<size_t>(c)] = classify(c);
  return table;
}();

Unit unit_at(std::string_view s, size_t i) {
  const auto b = static_cast<unsigned char>(s[i]);
  if (b < 0x80) return {kAscii[b], 1};
  // A well-formed sequence is at most 4 bytes and a maximal subpart at most 3, so a 4-byte window
  // suffices (and keeps ICU's int32 indices away from texts over 2 GiB).
  const auto* p = reinterpret_cast<const uint8_t*>(s.data() + i);
  const auto window = static_cast<int32_t>(std::min<size_t>(4, s.size() - i));
  int32_t k = 0;
  UChar32 c = 0;
  U8_NEXT(p, k, window, c);
  return {classify(c), static_cast<size_t>(k)};
}

size_t run_end(std::string_view s, size_t i, CharClass cls) {
  while (i < s.size()) {
    const Unit u = unit_at(s, i);
    if (u.cls != cls) break;
    i += u.len;
  }
  return i;
}

// 's 't 'm 'd 're 've 'll, lower case only: the length matched at i, or 0.
size_t contraction_at(std::string_view s, size_t i) {
  if (s[i] != '\'' || i + 1 >= s.size()) return 0;
  const char a = s[i + 1];
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
  if (i + 2 >= s.size()) return 0;
  const char b = s[i + 2];
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
  return 0;
}

}  // namespace

// The alternatives in the regex's order; the first that matches at pos_ wins.
bool Gpt2PreTokenizer::next(std::string_view& piece) {
  const std::string_view s = text_;
  const size_t i = pos_;
  if (i >= s.size()) return false;
  size_t end = i + contraction_at(s, i);
  if (end == i) {
    // " ?X+" for X in letters, numbers, other: the optional space binds only when X follows it; otherwise
    // " ?" matches empty and X+ cannot start at a space, so the space falls to the white-space rules.
    const Unit first = unit_at(s, i);
    size_t start = i;
    Unit u = first;
    if (s[i] == ' ' && i + 1 < s.size()) {
      const Unit after = unit_at(s, i + 1);
      if (after.cls != CharClass::Space) {
        start = i + 1;
        u = after;
      }
    }
    if (u.cls != CharClass::Space) {
      end = run_end(s, start + u.len, u.cls);
    } else {
      // "\s+(?!\S)": the whole run at the end of the text; before a non-space, the run minus its last
      // character (backtracking until the lookahead sees white space), which then starts the next piece
      // (" word" when it is a space). A single space character before a non-space: "\s+" takes it alone.
      size_t last = i;
      size_t k = i;
      while (k < s.size()) {
        const Unit w = unit_at(s, k);
        if (w.cls != CharClass::Space) break;
        last = k;
        k += w.len;
      }
      end = (k == s.size() || last == i) ? k : last;
    }
  }
  piece = s.substr(i, end - i);
  pos_ = end;
  return true;
}

}  // namespace gpt
