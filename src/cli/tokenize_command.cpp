#include "cli/tokenize_command.h"

#include <cerrno>
#include <cctype>
#include <charconv>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>

#include "cli/args.h"
#include "core/error.h"
#include "data/tokenizer.h"

namespace gpt {
namespace {

const std::vector<OptionSpec> kTokenizeOptions = {
    {"tokenizer", "NAME", "Tokenizer: gpt2 (default) or byte."},
    {"tokenizer-path", "DIR", "gpt2: directory of encoder.json + vocab.bpe or vocab.json + merges.txt (default ~/.cache/gpt-train/gpt2)."},
    {"decode", "", "Read token ids (separated by white space) and print the text they stand for."},
};

std::string read_input(const std::vector<std::string>& positionals) {
  if (positionals.empty()) return std::string(std::istreambuf_iterator<char>(std::cin), {});
  std::ifstream in(positionals[0], std::ios::binary);
  GPT_CHECK(in.is_open(), "tokenize: cannot open {}: {}", positionals[0], std::strerror(errno));
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::vector<int> parse_ids(const std::string& text) {
  std::vector<int> ids;
  size_t i = 0;
  while (i < text.size()) {
    if (std::isspace(static_cast<unsigned char>(text[i]))) {
      ++i;
      continue;
    }
    int id = 0;
    const auto [end, ec] = std::from_chars(text.data() + i, text.data() + text.size(), id);
    const size_t stop = static_cast<size_t>(end - text.data());
    GPT_CHECK(ec == std::errc() && (stop == text.size() || std::isspace(static_cast<unsigned char>(text[stop]))),
              "tokenize --decode: byte offset {} does not start a token id (a decimal integer)", i);
    ids.push_back(id);
    i = stop;
  }
  return ids;
}

}  // namespace

int run_tokenize_command(const std::vector<std::string>& argv) {
  const ParsedArgs args = parse_args("tokenize", argv, kTokenizeOptions);
  GPT_CHECK(args.positionals.size() <= 1, "usage: gpt-train tokenize [--tokenizer gpt2] [--decode] [FILE]");
  const auto tokenizer = make_tokenizer(args.get("tokenizer", "gpt2"), args.get("tokenizer-path"));
  const std::string input = read_input(args.positionals);
  if (args.has("decode")) {
    std::cout << tokenizer->decode(parse_ids(input));
  } else {
    const std::vector<int> ids = tokenizer->encode(input);
    std::string line;
    for (size_t i = 0; i < ids.size(); ++i) {
      if (i > 0) line.push_back(' ');
      line += std::to_string(ids[i]);
    }
    std::cout << line << '\n';
  }
  std::cout.flush();
  GPT_CHECK(std::cout.good(), "tokenize: cannot write to standard output");
  return 0;
}

std::string tokenize_help() {
  return "usage: gpt-train tokenize [options] [FILE]\n\nPrint the token ids of FILE (or standard input), separated by "
         "spaces on one line; with --decode, read ids and print their text.\n\noptions:\n" +
         options_help(kTokenizeOptions);
}

}  // namespace gpt
