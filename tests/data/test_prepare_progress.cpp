// prepare tokenises the text in pieces, for its progress line: the shards must be those of the text
// tokenised whole, for both tokenizers, on text full of the white space GPT-2's pre-tokeniser treats
// specially (runs of spaces and newlines, a newline before a space, text without a newline). Cutting
// after every newline instead fails here (3067 tokens instead of 3007 with GPT-2's).
#include "data/gpt2_tokenizer.h"
#include "data/prepare.h"
#include "test_util.h"

#include <filesystem>
#include <fstream>
#include <sstream>

namespace gpt::test {
namespace {

namespace fs = std::filesystem;

std::string bytes_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_text(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

std::string awkward_text() {
  std::string text;
  for (int i = 0; i < 60; ++i)
    text += "Line " + std::to_string(i) + ".\nIt's  two  spaces,\n\nthen a blank line;\n indented\n" +
            "tabs\t\tand\r\nCRLF!\n   \nend.\n\n\nthree newlines\n\xc3\xa9t\xc3\xa9 caf\xc3\xa9\n";
  return text + "no newline at the end";
}

void expect_chunked_equals_whole(const TempDir& dir, const std::string& tokenizer) {
  write_text(dir.file("input.txt"), awkward_text());
  PrepareOptions whole;
  whole.input = dir.file("input.txt");
  whole.out_dir = dir.file("whole");
  whole.tokenizer = tokenizer;
  whole.val_fraction = 0.0;
  const PrepareResult a = prepare_dataset(whole);
  ASSERT_EQ(a.train_shards.size(), 1u);
  // Pieces of a few bytes, from several offsets, so that a cut is tried at every place one could be.
  for (const size_t chunk : {1, 2, 3, 5, 8}) {
    PrepareOptions chunked = whole;
    chunked.out_dir = dir.file("chunked");
    chunked.tokenize_chunk_bytes = chunk;
    const PrepareResult b = prepare_dataset(chunked);
    EXPECT_EQ(a.train_tokens, b.train_tokens) << chunk;
    ASSERT_EQ(b.train_shards.size(), 1u);
    EXPECT_TRUE(bytes_of(a.train_shards[0]) == bytes_of(b.train_shards[0])) << "pieces of " << chunk << " bytes";
  }
}

TEST(PrepareProgress, PiecesGiveTheTokensOfTheWholeTextByteTokenizer) {
  TempDir dir;
  expect_chunked_equals_whole(dir, "byte");
}

TEST(PrepareProgress, PiecesGiveTheTokensOfTheWholeTextGpt2) {
  if (!fs::exists(fs::path(default_gpt2_tokenizer_dir()) / "encoder.json"))
    GTEST_SKIP() << "GPT-2 tokenizer files not in " << default_gpt2_tokenizer_dir()
                 << "; run scripts/fetch_gpt2_tokenizer.sh";
  TempDir dir;
  expect_chunked_equals_whole(dir, "gpt2");
}

}  // namespace
}  // namespace gpt::test
