// Instruction data for fine-tuning: JSONL, one example per line, in either of two styles —
//   {"prompt": "...", "completion": "..."}
//   {"messages": [{"role": "system"|"user"|"assistant", "content": "..."}, ...]}
// Other keys of a line are ignored (datasets often carry ids); blank lines are skipped.
//
// Every example is trained on its completion only: the prompt's tokens are context, their targets masked
// out of the loss (-1), and the completion ends with the end-of-text token, which is trained on so the
// model learns where to stop. Chat lines are rendered with this plain-text template (no special tokens
// beyond GPT-2's one end-of-text):
//   system/user turn:   "System:\n" or "User:\n", the content, "\n\n"          (context)
//   assistant turn:     "Assistant:\n"                                           (context)
//                       the content, then end-of-text                            (trained)
// so "[system, user, assistant]" reads "System:\n{s}\n\nUser:\n{u}\n\nAssistant:\n{a}<|endoftext|>", and a
// later turn continues right after that end-of-text. Every assistant turn is trained on.
//
// Context and trained pieces are tokenized separately, each run of context as one string: a prompt is
// encoded exactly as it is at inference, where the prompt is encoded and the completion generated after
// it, and no BPE token straddles the boundary between what is masked and what is trained.
//
// Layout into rows of T: each example is its end-of-text-led token sequence "<eot> prompt completion <eot>".
//   padding (default): one example per row of T tokens, filled with end-of-text tokens whose targets are
//     masked. No row holds two examples, so attention never sees another example; the cost is the compute
//     spent on padding, and examples longer than T tokens are left out (counted and reported).
//   packing (--pack): the examples back to back, each one's final end-of-text the next one's first token.
//     No compute is wasted and no example is too long, but the model has no document mask, so attention
//     within a row reaches back into the previous examples, and an example may be split across rows.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "data/tokenizer.h"

namespace gpt {

// A run of an example's text and whether it is trained on; a trained run is followed by end-of-text.
struct TextSegment {
  std::string text;
  bool trained = false;
  bool operator==(const TextSegment&) const = default;
};

struct InstructionExample {
  uint64_t line = 0;  // 1-based line of the JSONL file
  std::vector<TextSegment> segments;
};

struct BadLine {
  uint64_t line = 0;
  std::string reason;  // "invalid JSON: ...", "missing field \"completion\"", ...
};

struct InstructionFile {
  std::vector<InstructionExample> examples;
  std::vector<BadLine> bad_lines;  // only with skip_bad; otherwise the first one throws
  uint64_t blank_lines = 0;
};

// One line's example (its segments after the chat template), or the reason it is not one.
std::optional<std::string> parse_instruction_line(std::string_view line, InstructionExample& example);

// All lines of `text`; `name` (the file) prefixes messages. A bad line throws "name line N: reason" unless
// skip_bad, which collects it instead. Throws when no line is a valid example.
InstructionFile parse_instruction_jsonl(std::string_view text, const std::string& name, bool skip_bad);

// An example's tokens after its leading end-of-text: the segments' tokens, each trained segment followed
// by end-of-text; counted[i] is 1 when token i counts as a target (trained text and its end-of-text).
struct TokenizedExample {
  std::vector<int> tokens;
  std::vector<uint8_t> counted;
};
TokenizedExample tokenize_example(const InstructionExample& example, const Tokenizer& tokenizer);

// A stream of tokens and target masks ready for shards (see target_mask.h).
struct MaskedTokens {
  std::vector<uint16_t> tokens;
  std::vector<uint8_t> counted;
  uint64_t padding = 0;  // end-of-text tokens added to fill rows
};

// Packed: "<eot>" then every example's tokens.
MaskedTokens pack_examples(std::span<const TokenizedExample> examples, int eot);
// Padded: one row of T tokens per example ("<eot>", its tokens, <eot> padding), then one final "<eot>" so
// the last row has the token after it that the loader's windows of T+1 take: n rows are n·T + 1 tokens.
// Each example must hold at most T-1 tokens.
MaskedTokens pad_examples(std::span<const TokenizedExample> examples, int eot, int row_length);

}  // namespace gpt
