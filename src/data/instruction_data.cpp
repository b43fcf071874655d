#include "data/instruction_data.h"

#include <nlohmann/json.hpp>

#include <algorithm>

#include "core/error.h"
#include "data/shard.h"

namespace gpt {

namespace {

// nlohmann's messages open with "[json.exception.parse_error.101] "; the user needs what follows.
std::string json_reason(const nlohmann::json::exception& e) {
  const std::string what = e.what();
  const size_t end = what.find("] ");
  return what.starts_with("[json.exception.") && end != std::string::npos ? what.substr(end + 2) : what;
}

std::string type_of(const nlohmann::json& value) { return value.type_name(); }

std::optional<std::string> parse_prompt_completion(const nlohmann::json& object, InstructionExample& example) {
  if (!object.contains("prompt"))
    return "missing field \"prompt\" (a line holds \"prompt\" and \"completion\", or \"messages\")";
  if (!object.contains("completion")) return "missing field \"completion\"";
  const nlohmann::json& prompt = object["prompt"];
  const nlohmann::json& completion = object["completion"];
  if (!prompt.is_string()) return fmt::format("field \"prompt\" is {}, expected a string", type_of(prompt));
  if (!completion.is_string())
    return fmt::format("field \"completion\" is {}, expected a string", type_of(completion));
  if (completion.get_ref<const std::string&>().empty()) return "empty completion: there is nothing to train on";
  example.segments.clear();
  if (!prompt.get_ref<const std::string&>().empty()) example.segments.push_back({prompt.get<std::string>(), false});
  example.segments.push_back({completion.get<std::string>(), true});
  return std::nullopt;
}

std::optional<std::string> parse_chat(const nlohmann::json& messages, InstructionExample& example) {
  if (!messages.is_array()) return fmt::format("field \"messages\" is {}, expected an array", type_of(messages));
  example.segments.clear();
  std::string context;  // consecutive context text is one segment, encoded as one string
  bool any_assistant = false;
  for (size_t i = 0; i < messages.size(); ++i) {
    const nlohmann::json& message = messages[i];
    if (!message.is_object()) return fmt::format("messages[{}] is {}, expected an object", i, type_of(message));
    if (!message.contains("role")) return fmt::format("messages[{}]: missing field \"role\"", i);
    if (!message.contains("content")) return fmt::format("messages[{}]: missing field \"content\"", i);
    const nlohmann::json& role = message["role"];
    const nlohmann::json& content = message["content"];
    if (!content.is_string())
      return fmt::format("messages[{}]: field \"content\" is {}, expected a string", i, type_of(content));
    const std::string& text = content.get_ref<const std::string&>();
    const std::string name = role.is_string() ? role.get<std::string>() : "";
    if (name == "system" || name == "user") {
      context += (name == "system" ? "System:\n" : "User:\n") + text + "\n\n";
    } else if (name == "assistant") {
      if (text.empty())
        return fmt::format("messages[{}]: empty completion (assistant content): there is nothing to train on", i);
      context += "Assistant:\n";
      example.segments.push_back({std::move(context), false});
      context.clear();
      example.segments.push_back({text, true});
      any_assistant = true;
    } else {
      return fmt::format("messages[{}]: role is {}, expected \"system\", \"user\" or \"assistant\"", i,
                         role.is_string() ? "\"" + name + "\"" : type_of(role));
    }
  }
  if (!any_assistant) return "no assistant message: there is nothing to train on";
  // Turns after the last assistant one would only be context that nothing is predicted from.
  return std::nullopt;
}

}  // namespace

std::optional<std::string> parse_instruction_line(std::string_view line, InstructionExample& example) {
  nlohmann::json object;
  try {
    object = nlohmann::json::parse(line);
  } catch (const nlohmann::json::exception& e) {
    return "invalid JSON: " + json_reason(e);
  }
  if (!object.is_object()) return fmt::format("expected a JSON object, got {}", type_of(object));
  const bool chat = object.contains("messages");
  if (chat && (object.contains("prompt") || object.contains("completion")))
    return "holds both \"messages\" and \"prompt\"/\"completion\"; use one style per line";
  return chat ? parse_chat(object["messages"], example) : parse_prompt_completion(object, example);
}

InstructionFile parse_instruction_jsonl(std::string_view text, const std::string& name, bool skip_bad) {
  InstructionFile file;
  uint64_t line_number = 0;
  for (size_t begin = 0; begin < text.size();) {
    const size_t end = std::min(text.find('\n', begin), text.size());
    std::string_view line = text.substr(begin, end - begin);
    begin = end + 1;
    ++line_number;
    if (line.ends_with('\r')) line.remove_suffix(1);
    if (line.find_first_not_of(" \t") == std::string_view::npos) {
      ++file.blank_lines;
      continue;
    }
    InstructionExample example;
    example.line = line_number;
    if (const std::optional<std::string> reason = parse_instruction_line(line, example)) {
      GPT_CHECK(skip_bad, "{} line {}: {} (--skip-bad leaves such lines out)", name, line_number, *reason);
      file.bad_lines.push_back({line_number, *reason});
      continue;
    }
    file.examples.push_back(std::move(example));
  }
  GPT_CHECK(!file.examples.empty(), "{} holds no instruction example: {} line(s), {} bad, {} blank", name,
            line_number, file.bad_lines.size(), file.blank_lines);
  return file;
}

TokenizedExample tokenize_example(const InstructionExample& example, const Tokenizer& tokenizer) {
  TokenizedExample out;
  for (const TextSegment& segment : example.segments) {
    const std::vector<int> tokens = tokenizer.encode(segment.text);
    out.tokens.insert(out.tokens.end(), tokens.begin(), tokens.end());
    out.counted.insert(out.counted.end(), tokens.size(), segment.trained ? 1 : 0);
    if (segment.trained) {
      out.tokens.push_back(tokenizer.eot_token());
      out.counted.push_back(1);
    }
  }
  return out;
}

namespace {

void append(MaskedTokens& out, const TokenizedExample& example) {
  for (const int token : example.tokens) {
    GPT_CHECK(token >= 0 && token < kShardMaxVocab, "token {} cannot be stored in a uint16 token shard", token);
    out.tokens.push_back(static_cast<uint16_t>(token));
  }
  out.counted.insert(out.counted.end(), example.counted.begin(), example.counted.end());
}

void append_eot(MaskedTokens& out, int eot, size_t n) {
  out.tokens.insert(out.tokens.end(), n, static_cast<uint16_t>(eot));
  out.counted.insert(out.counted.end(), n, 0);
}

}  // namespace

MaskedTokens pack_examples(std::span<const TokenizedExample> examples, int eot) {
  MaskedTokens out;
  append_eot(out, eot, 1);
  for (const TokenizedExample& example : examples) append(out, example);
  return out;
}

MaskedTokens pad_examples(std::span<const TokenizedExample> examples, int eot, int row_length) {
  GPT_CHECK(row_length >= 2, "padding rows of {} tokens: a row needs at least 2 tokens", row_length);
  const auto T = static_cast<size_t>(row_length);
  MaskedTokens out;
  out.tokens.reserve(examples.size() * T + 1);
  out.counted.reserve(examples.size() * T + 1);
  for (const TokenizedExample& example : examples) {
    GPT_CHECK(example.tokens.size() < T, "an example of {} tokens does not fit a row of {} after its end-of-text",
              example.tokens.size(), T);
    append_eot(out, eot, 1);
    append(out, example);
    const size_t padding = T - 1 - example.tokens.size();
    append_eot(out, eot, padding);
    out.padding += padding;
  }
  // The token after the last row: the loader's window of T+1 tokens takes it as the last row's final target.
  append_eot(out, eot, 1);
  out.padding += 1;
  return out;
}

}  // namespace gpt
