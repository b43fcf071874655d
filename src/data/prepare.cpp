#include "data/prepare.h"

#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <span>

#include "core/error.h"
#include "core/progress.h"
#include "data/instruction_data.h"
#include "data/shard.h"
#include "data/target_mask.h"
#include "data/tokenizer.h"

namespace gpt {

namespace fs = std::filesystem;

namespace {

std::string read_text_file(const std::string& path) {
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  GPT_CHECK(fs::exists(status), "input text file {} does not exist", path);
  GPT_CHECK(fs::is_regular_file(status), "input text file {} is not a regular file", path);
  std::ifstream in(path, std::ios::binary);
  GPT_CHECK(in.is_open(), "cannot open input text file {}: {}", path, std::strerror(errno));
  const uint64_t size = fs::file_size(path);
  GPT_CHECK(size > 0, "input text file {} is empty", path);
  std::string text(size, '\0');
  in.read(text.data(), static_cast<std::streamsize>(size));
  GPT_CHECK(static_cast<uint64_t>(in.gcount()) == size, "read {} of the {} bytes of input text file {}", in.gcount(),
            size, path);
  return text;
}

std::vector<std::string> write_split(const std::string& out_dir, const std::string& split, std::span<const int> tokens,
                                     size_t shard_tokens, int vocab_size) {
  std::vector<std::string> paths;
  std::vector<uint16_t> chunk;
  for (size_t begin = 0; begin < tokens.size(); begin += shard_tokens) {
    const size_t n = std::min(shard_tokens, tokens.size() - begin);
    chunk.resize(n);
    for (size_t i = 0; i < n; ++i) {
      const int token = tokens[begin + i];
      GPT_CHECK(token >= 0 && token < vocab_size, "prepare: the tokenizer produced token {}, outside its vocab of {}",
                token, vocab_size);
      chunk[i] = static_cast<uint16_t>(token);
    }
    const std::string path = (fs::path(out_dir) / fmt::format("{}_{:06d}.bin", split, paths.size())).string();
    write_shard(path, chunk);
    paths.push_back(path);
  }
  return paths;
}

bool printable_ascii(char c) { return c > ' ' && c < 0x7f; }

// The first place at or after `from` where the text may be cut for tokenising it in pieces: after a lone
// newline between two printable non-space ASCII characters ("end.\nNext"). No pre-tokeniser piece crosses
// it: GPT-2's pattern joins white space to what follows only through a literal space, and a lone newline
// is the same piece ("\n") whether the text goes on or ends there, which a longer run of white space is
// not (at the end of a text "  \n" is one piece, before a letter it is "  " and "\n"). The byte tokenizer
// may be cut anywhere.
size_t tokenize_cut(std::string_view text, size_t from) {
  for (size_t i = std::max<size_t>(from, 2); i < text.size(); ++i)
    if (text[i - 1] == '\n' && printable_ascii(text[i]) && printable_ascii(text[i - 2])) return i;
  return text.size();
}

// A shard's name, or its mask's: a text prepare over jsonl output must not leave masks of other tokens.
bool is_shard_name(std::string name) {
  if (is_mask_path(name)) name.resize(name.size() - std::string_view(kMaskSuffix).size());
  for (const std::string prefix : {"train_", "val_"}) {
    const size_t digits = 6;
    if (name.size() != prefix.size() + digits + 4 || !name.starts_with(prefix) || !name.ends_with(".bin")) continue;
    const std::string middle = name.substr(prefix.size(), digits);
    if (std::all_of(middle.begin(), middle.end(), [](char c) { return c >= '0' && c <= '9'; })) return true;
  }
  return false;
}

void remove_stale_shards(const std::string& out_dir, const PrepareResult& result) {
  std::set<std::string> written;
  for (const auto& p : result.train_shards) written.insert(fs::path(p).filename().string());
  for (const auto& p : result.val_shards) written.insert(fs::path(p).filename().string());
  if (result.masked)
    for (const std::string& name : std::set<std::string>(written)) written.insert(mask_path_for(name));
  std::vector<fs::path> stale;
  std::error_code ec;
  for (fs::directory_iterator it(out_dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    std::error_code type_ec;
    if (it->is_regular_file(type_ec) && is_shard_name(name) && !written.contains(name)) stale.push_back(it->path());
  }
  GPT_CHECK(!ec, "prepare: cannot list output directory {}: {}", out_dir, ec.message());
  std::sort(stale.begin(), stale.end());
  for (const fs::path& path : stale) {
    spdlog::warn("removing stale {} {} from an earlier prepare",
                 is_mask_path(path.string()) ? "target mask" : "token shard", path.string());
    fs::remove(path, ec);
    GPT_CHECK(!ec, "prepare: cannot remove stale file {}: {}", path.string(), ec.message());
  }
}

// Padded: whole rows per shard (each shard its rows and the token after the last), so the loader's windows,
// which start at 0, T, 2T in each shard, start where the rows do. Packed: cut like text.
std::vector<std::string> write_masked_split(const PrepareOptions& options, const std::string& split,
                                            std::span<const TokenizedExample> examples, int eot,
                                            PrepareResult& result) {
  std::vector<std::string> paths;
  const auto write = [&](const MaskedTokens& part) {
    const std::string path = (fs::path(options.out_dir) / fmt::format("{}_{:06d}.bin", split, paths.size())).string();
    write_shard(path, part.tokens);
    const uint32_t row_length = options.pack ? 0 : static_cast<uint32_t>(options.seq_len);
    write_mask(mask_path_for(path), part.counted, part.tokens, row_length);
    paths.push_back(path);
    result.counted_tokens += static_cast<uint64_t>(std::count(part.counted.begin(), part.counted.end(), uint8_t{1}));
    result.padding_tokens += part.padding;
    (split == "train" ? result.train_tokens : result.val_tokens) += part.tokens.size();
  };
  if (examples.empty()) return paths;
  if (options.pack) {
    const MaskedTokens all = pack_examples(examples, eot);
    for (size_t begin = 0; begin < all.tokens.size(); begin += options.shard_tokens) {
      const size_t n = std::min(options.shard_tokens, all.tokens.size() - begin);
      MaskedTokens part;
      part.tokens.assign(all.tokens.begin() + begin, all.tokens.begin() + begin + n);
      part.counted.assign(all.counted.begin() + begin, all.counted.begin() + begin + n);
      write(part);
    }
    return paths;
  }
  const auto T = static_cast<size_t>(options.seq_len);
  const size_t rows_per_shard = std::max<size_t>(1, (options.shard_tokens - 1) / T);
  for (size_t begin = 0; begin < examples.size(); begin += rows_per_shard) {
    const size_t n = std::min(rows_per_shard, examples.size() - begin);
    write(pad_examples(examples.subspan(begin, n), eot, options.seq_len));
  }
  return paths;
}

PrepareResult prepare_jsonl(const PrepareOptions& options, const Tokenizer& tokenizer) {
  GPT_CHECK(options.pack || options.seq_len >= 2,
            "prepare --format jsonl: padding one example per row needs the row length: --seq-len T, the model's "
            "train.seq_len (or --pack to pack the examples instead)");
  GPT_CHECK(!options.pack || options.seq_len == 0,
            "prepare --format jsonl: --seq-len {} sets the padded row length, which --pack does not use",
            options.seq_len);
  const std::string text = read_text_file(options.input);
  const InstructionFile file = parse_instruction_jsonl(text, options.input, options.skip_bad);
  for (const BadLine& bad : file.bad_lines)
    spdlog::warn("{} line {}: {}; left out", options.input, bad.line, bad.reason);

  std::vector<TokenizedExample> examples;
  std::vector<uint64_t> too_long;
  for (const InstructionExample& example : file.examples) {
    TokenizedExample tokens = tokenize_example(example, tokenizer);
    if (!options.pack && tokens.tokens.size() >= static_cast<size_t>(options.seq_len)) {
      too_long.push_back(example.line);
      continue;
    }
    examples.push_back(std::move(tokens));
  }
  if (!too_long.empty()) {
    const size_t listed = std::min<size_t>(too_long.size(), 10);
    spdlog::warn("prepare: {} example(s) do not fit a row of {} tokens and are left out (lines {}{}); a larger "
                 "--seq-len or --pack keeps them",
                 too_long.size(), options.seq_len, fmt::join(too_long.begin(), too_long.begin() + listed, ", "),
                 too_long.size() > listed ? ", ..." : "");
  }
  const size_t n = examples.size();
  GPT_CHECK(n > 0, "prepare: no example of {} fits a row of {} tokens; use a larger --seq-len or --pack",
            options.input, options.seq_len);
  const auto n_val = static_cast<size_t>(std::llround(options.val_fraction * static_cast<double>(n)));
  GPT_CHECK(n_val < n, "prepare: {} has only {} example(s), none left for training after holding out {}",
            options.input, n, n_val);
  if (options.val_fraction > 0.0 && n_val == 0)
    spdlog::warn("prepare: {} has only {} example(s); val_fraction {} leaves no validation examples", options.input,
                 n, options.val_fraction);

  std::error_code ec;
  fs::create_directories(options.out_dir, ec);
  GPT_CHECK(!ec, "prepare: cannot create output directory {}: {}", options.out_dir, ec.message());

  PrepareResult result;
  result.tokenizer = tokenizer.name();
  result.vocab_size = tokenizer.vocab_size();
  result.text_bytes = text.size();
  result.masked = true;
  result.examples = n;
  result.bad_lines = file.bad_lines.size();
  result.too_long_examples = too_long.size();
  const std::span<const TokenizedExample> all(examples);
  result.train_shards = write_masked_split(options, "train", all.first(n - n_val), tokenizer.eot_token(), result);
  result.val_shards = write_masked_split(options, "val", all.last(n_val), tokenizer.eot_token(), result);
  remove_stale_shards(options.out_dir, result);

  const uint64_t total = result.train_tokens + result.val_tokens;
  spdlog::info("prepared {}: {} examples ({} bad line(s) and {} too long left out) -> {} {} tokens, {} of them "
               "counted targets, {} padding ({:.1f}%, {}); train {} tokens in {} shard(s), val {} in {}, with target "
               "masks, under {}",
               options.input, n, result.bad_lines, result.too_long_examples, total, result.tokenizer,
               result.counted_tokens, result.padding_tokens,
               100.0 * static_cast<double>(result.padding_tokens) / static_cast<double>(std::max<uint64_t>(total, 1)),
               options.pack ? "packed" : fmt::format("rows of {}", options.seq_len), result.train_tokens,
               result.train_shards.size(), result.val_tokens, result.val_shards.size(), options.out_dir);
  return result;
}

}  // namespace

PrepareResult prepare_dataset(const PrepareOptions& options) {
  GPT_CHECK(!options.input.empty(), "prepare: no input text file given");
  GPT_CHECK(!options.out_dir.empty(), "prepare: no output directory given");
  GPT_CHECK(std::isfinite(options.val_fraction) && options.val_fraction >= 0.0 && options.val_fraction < 1.0,
            "prepare: val_fraction is {}, expected a value in [0, 1)", options.val_fraction);
  GPT_CHECK(options.shard_tokens >= 1 && options.shard_tokens <= static_cast<size_t>(std::numeric_limits<int32_t>::max()),
            "prepare: shard_tokens is {}, expected 1 to {}", options.shard_tokens, std::numeric_limits<int32_t>::max());

  const std::unique_ptr<Tokenizer> tokenizer = make_tokenizer(options.tokenizer, options.tokenizer_path);
  GPT_CHECK(tokenizer->vocab_size() <= kShardMaxVocab,
            "prepare: tokenizer {} has {} tokens, more than the {} that uint16 token shards can hold",
            tokenizer->name(), tokenizer->vocab_size(), kShardMaxVocab);
  GPT_CHECK(options.format == "text" || options.format == "jsonl",
            "prepare: format '{}' is unknown; expected text or jsonl", options.format);
  if (options.format == "jsonl") return prepare_jsonl(options, *tokenizer);
  GPT_CHECK(!options.pack && options.seq_len == 0 && !options.skip_bad,
            "prepare: --pack, --seq-len and --skip-bad are for instruction data (--format jsonl)");

  const std::string text = read_text_file(options.input);
  Progress progress("prepare", ProgressUnit::Bytes, text.size());
  std::vector<int> tokens;
  // With a vocabulary that has an end-of-text token of its own (gpt2), the file is one document and starts
  // with it, as llm.c's prepare scripts start every document; the byte tokenizer's "end of text" is '\n',
  // already in the text.
  if (tokenizer->name() != "byte") tokens.push_back(tokenizer->eot_token());
  const std::string_view all_text(text);
  for (size_t begin = 0; begin < text.size();) {
    const size_t end = tokenize_cut(all_text, begin + std::max<size_t>(1, options.tokenize_chunk_bytes));
    const std::vector<int> piece = tokenizer->encode(all_text.substr(begin, end - begin));
    tokens.insert(tokens.end(), piece.begin(), piece.end());
    begin = end;
    progress.update(begin);
  }
  const size_t n = tokens.size();
  const auto n_val = static_cast<size_t>(std::llround(options.val_fraction * static_cast<double>(n)));
  GPT_CHECK(n_val < n, "prepare: input text file {} has only {} tokens, none left for training after holding out {}",
            options.input, n, n_val);
  if (options.val_fraction > 0.0 && n_val == 0)
    spdlog::warn("prepare: {} has only {} tokens; val_fraction {} leaves no validation tokens", options.input, n,
                 options.val_fraction);

  std::error_code ec;
  fs::create_directories(options.out_dir, ec);
  GPT_CHECK(!ec, "prepare: cannot create output directory {}: {}", options.out_dir, ec.message());

  PrepareResult result;
  result.tokenizer = tokenizer->name();
  result.vocab_size = tokenizer->vocab_size();
  result.text_bytes = text.size();
  result.train_tokens = n - n_val;
  result.val_tokens = n_val;
  const std::span<const int> all(tokens);
  result.train_shards = write_split(options.out_dir, "train", all.first(n - n_val), options.shard_tokens,
                                    result.vocab_size);
  result.val_shards = write_split(options.out_dir, "val", all.last(n_val), options.shard_tokens, result.vocab_size);
  remove_stale_shards(options.out_dir, result);

  progress.finish(fmt::format("1 document ({}), {} bytes -> {} {} tokens (vocab {}); train {} tokens in {} "
                              "shard(s), val {} tokens in {} shard(s), under {}",
                              options.input, result.text_bytes, n, result.tokenizer, result.vocab_size,
                              result.train_tokens, result.train_shards.size(), result.val_tokens,
                              result.val_shards.size(), options.out_dir));
  return result;
}

}  // namespace gpt
