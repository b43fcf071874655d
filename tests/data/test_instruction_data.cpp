#include "data/instruction_data.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>

#include "data/gpt2_tokenizer.h"
#include "test_util.h"

namespace gpt {
namespace {

using test::error_message;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

std::optional<std::string> reason_for(std::string_view line) {
  InstructionExample example;
  return parse_instruction_line(line, example);
}

TEST(InstructionLine, PromptCompletion) {
  InstructionExample example;
  ASSERT_EQ(parse_instruction_line(R"({"prompt": "Q: 2+2?\nA:", "completion": " 4", "id": 7})", example), std::nullopt);
  EXPECT_EQ(example.segments, (std::vector<TextSegment>{{"Q: 2+2?\nA:", false}, {" 4", true}}));
}

TEST(InstructionLine, EmptyPromptTrainsOnTheCompletionAlone) {
  InstructionExample example;
  ASSERT_EQ(parse_instruction_line(R"({"prompt": "", "completion": "text"})", example), std::nullopt);
  EXPECT_EQ(example.segments, (std::vector<TextSegment>{{"text", true}}));
}

TEST(InstructionLine, ChatTemplateTrainsEveryAssistantTurn) {
  InstructionExample example;
  ASSERT_EQ(parse_instruction_line(R"({"messages": [{"role": "system", "content": "Be brief."},
      {"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello."},
      {"role": "user", "content": "Bye"}, {"role": "assistant", "content": "Bye."}]})",
                                   example),
            std::nullopt);
  EXPECT_EQ(example.segments, (std::vector<TextSegment>{{"System:\nBe brief.\n\nUser:\nHi\n\nAssistant:\n", false},
                                                        {"Hello.", true},
                                                        {"User:\nBye\n\nAssistant:\n", false},
                                                        {"Bye.", true}}));
}

TEST(InstructionLine, BadLinesSayWhatIsWrong) {
  EXPECT_THAT(reason_for(R"({"prompt": "a", "completion": )").value_or(""), HasSubstr("invalid JSON"));
  EXPECT_THAT(reason_for("[1, 2]").value_or(""), HasSubstr("expected a JSON object, got array"));
  EXPECT_THAT(reason_for(R"({"prompt": "a"})").value_or(""), HasSubstr("missing field \"completion\""));
  EXPECT_THAT(reason_for(R"({"completion": "a"})").value_or(""), HasSubstr("missing field \"prompt\""));
  EXPECT_THAT(reason_for(R"({"prompt": "a", "completion": ""})").value_or(""), HasSubstr("empty completion"));
  EXPECT_THAT(reason_for(R"({"prompt": 3, "completion": "a"})").value_or(""),
              HasSubstr("\"prompt\" is number, expected a string"));
  EXPECT_THAT(reason_for(R"({"messages": [{"role": "user", "content": "a"}]})").value_or(""),
              HasSubstr("no assistant message"));
  EXPECT_THAT(reason_for(R"({"messages": [{"role": "assistant", "content": ""}]})").value_or(""),
              HasSubstr("messages[0]: empty completion"));
  EXPECT_THAT(reason_for(R"({"messages": [{"role": "bot", "content": "a"}]})").value_or(""),
              HasSubstr("messages[0]: role is \"bot\""));
  EXPECT_THAT(reason_for(R"({"messages": [{"role": "user"}]})").value_or(""),
              HasSubstr("messages[0]: missing field \"content\""));
  EXPECT_THAT(reason_for(R"({"messages": "hi"})").value_or(""), HasSubstr("\"messages\" is string, expected an array"));
  EXPECT_THAT(reason_for(R"({"messages": [], "prompt": "a", "completion": "b"})").value_or(""),
              HasSubstr("one style per line"));
}

const std::string kFile =
    "{\"prompt\": \"a\", \"completion\": \"b\"}\n"
    "\n"
    "{\"prompt\": \"a\"}\n"
    "{\"messages\": [{\"role\": \"user\", \"content\": \"u\"}, {\"role\": \"assistant\", \"content\": \"v\"}]}\r\n"
    "not json\n"
    "{\"prompt\": \"c\", \"completion\": \"\"}\n"
    "{\"prompt\": \"c\", \"completion\": \"d\"}";  // no final newline

TEST(InstructionFile, FirstBadLineStopsNamingItsNumber) {
  const std::string message = error_message([] { parse_instruction_jsonl(kFile, "data.jsonl", false); });
  EXPECT_THAT(message, HasSubstr("data.jsonl line 3: missing field \"completion\""));
  EXPECT_THAT(message, HasSubstr("--skip-bad"));
}

TEST(InstructionFile, SkipBadCountsAndNumbersEveryBadLine) {
  const InstructionFile file = parse_instruction_jsonl(kFile, "data.jsonl", true);
  ASSERT_EQ(file.examples.size(), 3u);
  EXPECT_EQ(file.examples[0].line, 1u);
  EXPECT_EQ(file.examples[1].line, 4u);
  EXPECT_EQ(file.examples[2].line, 7u);
  ASSERT_EQ(file.bad_lines.size(), 3u);
  EXPECT_EQ(file.bad_lines[0].line, 3u);
  EXPECT_EQ(file.bad_lines[1].line, 5u);
  EXPECT_THAT(file.bad_lines[1].reason, HasSubstr("invalid JSON"));
  EXPECT_EQ(file.bad_lines[2].line, 6u);
  EXPECT_THAT(file.bad_lines[2].reason, HasSubstr("empty completion"));
  EXPECT_EQ(file.blank_lines, 1u);
}

TEST(InstructionFile, NoValidLineIsAnError) {
  EXPECT_THAT(error_message([] { parse_instruction_jsonl("x\n\n", "d.jsonl", true); }),
              HasSubstr("d.jsonl holds no instruction example: 2 line(s), 1 bad, 1 blank"));
}

TEST(InstructionTokens, CompletionAndItsEndOfTextCountPromptDoesNot) {
  ByteTokenizer bytes;
  const int eot = bytes.eot_token();
  InstructionExample example;
  example.segments = {{"ab", false}, {"cd", true}, {"e", false}, {"f", true}};
  const TokenizedExample t = tokenize_example(example, bytes);
  EXPECT_EQ(t.tokens, (std::vector<int>{'a', 'b', 'c', 'd', eot, 'e', 'f', eot}));
  EXPECT_EQ(t.counted, (std::vector<uint8_t>{0, 0, 1, 1, 1, 0, 1, 1}));
}

TEST(InstructionLayout, PackSharesEachEndOfTextWithTheNextExample) {
  const std::vector<TokenizedExample> examples = {{{1, 2, 9}, {0, 1, 1}}, {{3, 4, 5, 9}, {0, 0, 1, 1}}};
  const MaskedTokens packed = pack_examples(examples, 9);
  EXPECT_EQ(packed.tokens, (std::vector<uint16_t>{9, 1, 2, 9, 3, 4, 5, 9}));
  EXPECT_EQ(packed.counted, (std::vector<uint8_t>{0, 0, 1, 1, 0, 0, 1, 1}));
  EXPECT_EQ(packed.padding, 0u);
}

TEST(InstructionLayout, PadGivesEachExampleARowAndOneTokenAfterTheLast) {
  const std::vector<TokenizedExample> examples = {{{1, 2, 9}, {0, 1, 1}}, {{3, 4, 5, 9}, {0, 0, 1, 1}}};
  const MaskedTokens padded = pad_examples(examples, 9, 5);
  EXPECT_EQ(padded.tokens, (std::vector<uint16_t>{9, 1, 2, 9, 9, /**/ 9, 3, 4, 5, 9, /**/ 9}));
  EXPECT_EQ(padded.counted, (std::vector<uint8_t>{0, 0, 1, 1, 0, /**/ 0, 0, 0, 1, 1, /**/ 0}));
  EXPECT_EQ(padded.padding, 2u);
  EXPECT_THAT(error_message([&] { pad_examples(examples, 9, 4); }), HasSubstr("does not fit a row of 4"));
}

const Gpt2Tokenizer* real_gpt2() {
  static const std::unique_ptr<Gpt2Tokenizer> tok = []() -> std::unique_ptr<Gpt2Tokenizer> {
    const fs::path dir = default_gpt2_tokenizer_dir();
    if (!fs::exists(dir / "encoder.json") || !fs::exists(dir / "vocab.bpe")) return nullptr;
    return std::make_unique<Gpt2Tokenizer>(dir.string());
  }();
  return tok.get();
}

// The prompt is encoded as one string, as at inference, and the completion after it; the end-of-text that
// ends the completion is GPT-2's own token, not the text "<|endoftext|>".
TEST(InstructionTokens, Gpt2PromptAndCompletionAreEncodedApart) {
  const Gpt2Tokenizer* gpt2 = real_gpt2();
  if (gpt2 == nullptr)
    GTEST_SKIP() << "GPT-2 tokenizer files not in " << default_gpt2_tokenizer_dir()
                 << "; run scripts/fetch_gpt2_tokenizer.sh";
  InstructionExample example;
  ASSERT_EQ(parse_instruction_line(R"({"messages": [{"role": "user", "content": "Capital of France?"},
      {"role": "assistant", "content": "Paris."}]})",
                                   example),
            std::nullopt);
  const TokenizedExample t = tokenize_example(example, *gpt2);
  std::vector<int> expected = gpt2->encode("User:\nCapital of France?\n\nAssistant:\n");
  const size_t prompt = expected.size();
  for (int token : gpt2->encode("Paris.")) expected.push_back(token);
  expected.push_back(50256);
  EXPECT_EQ(t.tokens, expected);
  std::vector<uint8_t> counted(expected.size(), 1);
  std::fill(counted.begin(), counted.begin() + static_cast<std::ptrdiff_t>(prompt), 0);
  EXPECT_EQ(t.counted, counted);
}

}  // namespace
}  // namespace gpt
