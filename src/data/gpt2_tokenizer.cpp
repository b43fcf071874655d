#include "data/gpt2_tokenizer.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include "core/error.h"
#include "data/gpt2_pretokenizer.h"

namespace gpt {

namespace fs = std::filesystem;

namespace {

// Past this many distinct pieces the word cache starts afresh, so memory stays bounded on any corpus
// (GPT-2's own encoder.py lets its cache grow without bound).
constexpr size_t kMaxCachedPieces = size_t{1} << 20;

// GPT-2's bytes_to_unicode(): the vocabulary files spell byte b as code point kByteChar[b]; printable
// bytes as themselves, the other 68 as 256, 257, ... in byte order, so every token is a printable string.
const std::array<uint16_t, 256> kByteChar = [] {
  std::array<uint16_t, 256> map{};
  int n = 0;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    map[static_cast<size_t>(b)] = static_cast<uint16_t>(printable ? b : 256 + n++);
  }
  return map;
}();

constexpr int kCharRange = 256 + 68;

const std::array<int16_t, kCharRange> kCharByte = [] {
  std::array<int16_t, kCharRange> map{};
  map.fill(-1);
  for (int b = 0; b < 256; ++b) map[kByteChar[static_cast<size_t>(b)]] = static_cast<int16_t>(b);
  return map;
}();

std::string char_of_byte(unsigned char b) {
  const uint16_t c = kByteChar[b];
  std::string s;
  if (c < 0x80) {
    s.push_back(static_cast<char>(c));
  } else {
    s.push_back(static_cast<char>(0xC0 | (c >> 6)));
    s.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
  return s;
}

// A vocabulary key (UTF-8 over GPT-2's 324-character byte alphabet) -> the bytes it stands for; throws
// naming the key when it holds any other character.
std::string key_bytes(const std::string& key, const std::string& file) {
  std::string bytes;
  for (size_t i = 0; i < key.size();) {
    const auto b0 = static_cast<unsigned char>(key[i]);
    int c = -1;
    if (b0 < 0x80) {
      c = b0;
      i += 1;
    } else if ((b0 & 0xE0) == 0xC0 && i + 1 < key.size() && (static_cast<unsigned char>(key[i + 1]) & 0xC0) == 0x80) {
      c = ((b0 & 0x1F) << 6) | (static_cast<unsigned char>(key[i + 1]) & 0x3F);
      if (c < 0x80) c = -1;  // overlong
      i += 2;
    }
    GPT_CHECK(c >= 0 && c < kCharRange && kCharByte[static_cast<size_t>(c)] >= 0,
              "{}: token \"{}\" has a character outside GPT-2's byte alphabet at byte {} of the key", file, key, i);
    bytes.push_back(static_cast<char>(kCharByte[static_cast<size_t>(c)]));
  }
  return bytes;
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  GPT_CHECK(in.is_open(), "cannot open GPT-2 tokenizer file {}: {}", path.string(), std::strerror(errno));
  std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  GPT_CHECK(!in.bad(), "cannot read GPT-2 tokenizer file {}", path.string());
  return data;
}

uint64_t pair_key(int left, int right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

}  // namespace

std::string default_gpt2_tokenizer_dir() {
  if (const char* dir = std::getenv("GPT_TRAIN_GPT2_DIR"); dir != nullptr && *dir != '\0') return dir;
  if (const char* cache = std::getenv("XDG_CACHE_HOME"); cache != nullptr && *cache != '\0')
    return (fs::path(cache) / "gpt-train" / "gpt2").string();
  const char* home = std::getenv("HOME");
  return (fs::path(home != nullptr ? home : ".") / ".cache" / "gpt-train" / "gpt2").string();
}

Gpt2Tokenizer::Gpt2Tokenizer(const std::string& dir_arg) {
  const fs::path dir = dir_arg.empty() ? fs::path(default_gpt2_tokenizer_dir()) : fs::path(dir_arg);
  for (const auto& [vocab, merges] : {std::pair{"encoder.json", "vocab.bpe"}, std::pair{"vocab.json", "merges.txt"}}) {
    if (fs::exists(dir / vocab) && fs::exists(dir / merges)) {
      load(read_file(dir / vocab), (dir / vocab).string(), read_file(dir / merges), (dir / merges).string());
      return;
    }
  }
  GPT_FAIL("GPT-2 tokenizer files not found in {}: expected encoder.json + vocab.bpe or vocab.json + merges.txt; "
           "run scripts/fetch_gpt2_tokenizer.sh (fetches them once into {}) or set data.tokenizer_path",
           dir.string(), default_gpt2_tokenizer_dir());
}

Gpt2Tokenizer::Gpt2Tokenizer(const std::string& vocab_json, const std::string& vocab_name,
                             const std::string& merges_text, const std::string& merges_name) {
  load(vocab_json, vocab_name, merges_text, merges_name);
}

void Gpt2Tokenizer::load(const std::string& vocab_json, const std::string& vocab_name, const std::string& merges_text,
                         const std::string& merges_name) {
  nlohmann::json vocab;
  try {
    vocab = nlohmann::json::parse(vocab_json);
  } catch (const nlohmann::json::parse_error& e) {
    // nlohmann counts bytes read (1-based); the offset is that of the last byte read.
    GPT_FAIL("{}: not valid JSON at byte offset {}: {}", vocab_name, e.byte > 0 ? e.byte - 1 : 0, e.what());
  } catch (const nlohmann::json::exception& e) {
    // What parses but cannot be held, e.g. a number beyond a double's range (out_of_range.406).
    GPT_FAIL("{}: not valid JSON: {}", vocab_name, e.what());
  }
  GPT_CHECK(vocab.is_object() && !vocab.empty(), "{}: expected a JSON object mapping token strings to ids",
            vocab_name);
  GPT_CHECK(vocab.size() <= static_cast<size_t>(std::numeric_limits<int32_t>::max()), "{}: too many tokens",
            vocab_name);
  const size_t n = vocab.size();
  std::unordered_map<std::string, int> id_of;
  id_of.reserve(n);
  token_bytes_.assign(n, std::string());
  std::vector<bool> seen(n, false);
  for (const auto& [key, value] : vocab.items()) {
    GPT_CHECK(value.is_number_integer(), "{}: token \"{}\" has id {}, expected an integer", vocab_name, key,
              value.dump());
    const auto id = value.get<int64_t>();
    GPT_CHECK(id >= 0 && static_cast<uint64_t>(id) < n,
              "{}: token \"{}\" has id {}, outside 0..{} (the ids must number the {} tokens without gaps)",
              vocab_name, key, id, n - 1, n);
    GPT_CHECK(!seen[static_cast<size_t>(id)], "{}: id {} is given to two tokens (one is \"{}\")", vocab_name, id, key);
    seen[static_cast<size_t>(id)] = true;
    token_bytes_[static_cast<size_t>(id)] = key_bytes(key, vocab_name);
    id_of.emplace(key, static_cast<int>(id));
  }
  for (int b = 0; b < 256; ++b) {
    const auto it = id_of.find(char_of_byte(static_cast<unsigned char>(b)));
    GPT_CHECK(it != id_of.end(), "{}: no token for byte {} (\"{}\"); byte-level BPE needs all 256", vocab_name, b,
              char_of_byte(static_cast<unsigned char>(b)));
    byte_token_[static_cast<size_t>(b)] = it->second;
  }
  const auto eot = id_of.find("<|endoftext|>");
  GPT_CHECK(eot != id_of.end(), "{}: no \"<|endoftext|>\" token", vocab_name);
  eot_ = eot->second;

  // One merge per line, "left right", ranked by order; an optional "#version" first line and blank lines
  // are skipped. A pair listed twice keeps its last rank, as encoder.py's dict(zip(merges, range)) does.
  merges_.clear();
  size_t line_start = 0;
  int line_no = 0;
  int rank = 0;
  while (line_start < merges_text.size()) {
    size_t line_end = merges_text.find('\n', line_start);
    if (line_end == std::string::npos) line_end = merges_text.size();
    ++line_no;
    std::string_view line(merges_text.data() + line_start, line_end - line_start);
    const size_t offset = line_start;
    line_start = line_end + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty() || (line_no == 1 && line.starts_with("#version"))) continue;
    const size_t space = line.find(' ');
    GPT_CHECK(space != std::string_view::npos && space > 0 && space + 1 < line.size() &&
                  line.find(' ', space + 1) == std::string_view::npos,
              "{}: line {} (byte offset {}) is \"{}\", expected two tokens separated by one space", merges_name,
              line_no, offset, line);
    const std::string left(line.substr(0, space));
    const std::string right(line.substr(space + 1));
    const auto l = id_of.find(left);
    const auto r = id_of.find(right);
    const auto m = id_of.find(left + right);
    GPT_CHECK(l != id_of.end() && r != id_of.end() && m != id_of.end(),
              "{}: line {} (byte offset {}) merges \"{}\" and \"{}\", but \"{}\" is not in {}", merges_name, line_no,
              offset, left, right, l == id_of.end() ? left : r == id_of.end() ? right : left + right, vocab_name);
    merges_[pair_key(l->second, r->second)] = Merge{rank++, m->second};
  }
}

// encoder.py's bpe(): while some adjacent pair has a merge, take the lowest-ranked pair and merge all its
// non-overlapping occurrences left to right. Here a heap of candidate pairs ordered by (rank, position)
// replaces the rescan of the whole word per merge (O(n log n) instead of O(n^2)); all occurrences of one
// rank are merged before the pairs they create are queued, which is the "all occurrences" step exactly.
// An entry is stale when either symbol has changed since it was queued; a merge always changes the left
// symbol's id, so comparing ids is enough.
void Gpt2Tokenizer::encode_piece_into(std::string_view piece, PieceScratch& scratch, std::vector<int>& out) const {
  const int m = static_cast<int>(piece.size());
  std::vector<int>& id = scratch.id;
  std::vector<int>& next = scratch.next;
  std::vector<int>& prev = scratch.prev;
  id.resize(static_cast<size_t>(m));
  next.resize(static_cast<size_t>(m));
  prev.resize(static_cast<size_t>(m));
  for (int i = 0; i < m; ++i) {
    id[i] = byte_token_[static_cast<unsigned char>(piece[static_cast<size_t>(i)])];
    prev[i] = i - 1;
    next[i] = i + 1 < m ? i + 1 : -1;
  }
  const auto after = [](const Candidate& a, const Candidate& b) {
    return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos;
  };
  std::vector<Candidate>& heap = scratch.heap;
  heap.clear();
  const auto push = [&](int p) {
    if (p < 0 || next[p] < 0) return;
    const auto it = merges_.find(pair_key(id[p], id[next[p]]));
    if (it == merges_.end()) return;
    heap.push_back({it->second.rank, p, id[p], id[next[p]]});
    std::push_heap(heap.begin(), heap.end(), after);
  };
  for (int p = 0; p + 1 < m; ++p) push(p);
  std::vector<int>& merged = scratch.merged;
  while (!heap.empty()) {
    const int rank = heap.front().rank;
    merged.clear();
    while (!heap.empty() && heap.front().rank == rank) {
      std::pop_heap(heap.begin(), heap.end(), after);
      const Candidate c = heap.back();
      heap.pop_back();
      const int q = next[c.pos];
      if (id[c.pos] != c.left || q < 0 || id[q] != c.right) continue;
      id[c.pos] = merges_.at(pair_key(c.left, c.right)).id;
      next[c.pos] = next[q];
      if (next[q] >= 0) prev[next[q]] = c.pos;
      id[q] = -1;
      merged.push_back(c.pos);
    }
    for (const int p : merged) {
      push(prev[p]);
      push(p);
    }
  }
  for (int p = m > 0 ? 0 : -1; p >= 0; p = next[p]) out.push_back(id[p]);
}

std::vector<int> Gpt2Tokenizer::encode_piece(std::string_view piece) const {
  PieceScratch scratch;
  std::vector<int> out;
  encode_piece_into(piece, scratch, out);
  return out;
}

std::vector<int> Gpt2Tokenizer::encode(std::string_view text) const {
  std::vector<int> out;
  out.reserve(text.size() / 3);
  // Pieces are views into text, which outlives the call; each cached piece's ids lie in pool[begin, end).
  // Sized for the text's pieces up front (about one per 4 bytes), so neither rehashes nor regrows.
  std::unordered_map<std::string_view, std::pair<size_t, size_t>> cache;
  cache.reserve(std::min(text.size() / 4, kMaxCachedPieces));
  std::vector<int> pool;
  pool.reserve(std::min(text.size() / 3, kMaxCachedPieces));
  PieceScratch scratch;
  Gpt2PreTokenizer pre(text);
  std::string_view piece;
  while (pre.next(piece)) {
    if (piece.size() == 1) {
      out.push_back(byte_token_[static_cast<unsigned char>(piece[0])]);
      continue;
    }
    auto it = cache.find(piece);
    if (it == cache.end()) {
      if (cache.size() >= kMaxCachedPieces) {
        cache.clear();
        pool.clear();
      }
      const size_t begin = pool.size();
      encode_piece_into(piece, scratch, pool);
      it = cache.emplace(piece, std::pair{begin, pool.size()}).first;
    }
    out.insert(out.end(), pool.begin() + static_cast<std::ptrdiff_t>(it->second.first),
               pool.begin() + static_cast<std::ptrdiff_t>(it->second.second));
  }
  return out;
}

std::string Gpt2Tokenizer::decode(std::span<const int> tokens) const {
  std::string text;
  for (size_t i = 0; i < tokens.size(); ++i) {
    GPT_CHECK(tokens[i] >= 0 && tokens[i] < vocab_size(), "gpt2 tokenizer cannot decode token {} at index {}: ids "
              "are 0..{}", tokens[i], i, vocab_size() - 1);
    text += token_bytes_[static_cast<size_t>(tokens[i])];
  }
  return text;
}

}  // namespace gpt
