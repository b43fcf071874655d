#include "config/model_from_checkpoint.h"

#include "core/error.h"
#include "io/checkpoint_shape.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <array>
#include <cstdint>
#include <filesystem>
#include <string_view>

namespace gpt::config_detail {

namespace {

constexpr std::array<std::string_view, 5> kShapeKeys = {"vocab_size", "context_length", "n_layer", "n_head", "n_embd"};

int& member(ModelConfig& m, std::string_view key) {
  if (key == "vocab_size") return m.vocab_size;
  if (key == "context_length") return m.context_length;
  if (key == "n_layer") return m.n_layer;
  if (key == "n_head") return m.n_head;
  return m.n_embd;
}

// In 64 bits and only for a positive multiple: validation, which refuses the rest, runs after this.
int64_t padded(int64_t vocab, int64_t multiple) { return (vocab + multiple - 1) / multiple * multiple; }

// The smallest multiple that pads vocab to padded_vocab: a divisor of padded_vocab greater than
// padded_vocab - vocab (padded_vocab itself always is one), found among the divisor pairs up to its root.
int smallest_pad_multiple(int64_t vocab, int64_t padded_vocab) {
  int64_t best = padded_vocab;
  for (int64_t d = 1; d * d <= padded_vocab; ++d) {
    if (padded_vocab % d != 0) continue;
    for (const int64_t divisor : {d, padded_vocab / d})
      if (divisor > padded_vocab - vocab && divisor < best) best = divisor;
  }
  return static_cast<int>(best);
}

}  // namespace

void fill_model_from_checkpoint(ModelConfig& model, KeyOrigins& origins) {
  if (model.init_from.empty()) return;
  const auto written = [&](const std::string& name) { return origins.contains(name); };
  const std::string where = written("model.init_from") ? origins.at("model.init_from") : "model.init_from";
  std::vector<std::string> unwritten;
  for (const std::string_view key : kShapeKeys)
    if (!written(fmt::format("model.{}", key))) unwritten.push_back(fmt::format("model.{}", key));
  std::error_code ec;
  if (!std::filesystem::exists(model.init_from, ec)) {
    GPT_CHECK(unwritten.empty(), "{}: model.init_from: {} does not exist, so {} (not written) cannot be taken from "
              "it; correct the path, or write those keys", where, model.init_from, fmt::join(unwritten, ", "));
    return;
  }
  const CheckpointShape shape = read_checkpoint_shape(model.init_from);
  std::vector<std::string> taken;
  for (const std::string_view key : kShapeKeys) {
    const std::string name = fmt::format("model.{}", key);
    int& ours = member(model, key);
    const CheckpointShapeValue* theirs = shape.find(std::string(key));
    if (theirs == nullptr) {
      GPT_CHECK(written(name), "{}: {} is not written, and model.init_from cannot give it: {}; write {}", where, name,
                shape.missing_reason, name);
    } else if (written(name)) {
      GPT_CHECK(ours == theirs->value, "{}: {} is {}, but model.init_from's checkpoint has {} ({}); remove {} to take "
                "the checkpoint's, or point model.init_from at a model with {} {}", origins.at(name), name, ours,
                theirs->value, theirs->source, name, key, ours);
    } else {
      ours = theirs->value;
      origins[name] = theirs->source;
      taken.push_back(fmt::format("{} {}", key, ours));
    }
  }
  // An llm.c file states its padded vocabulary, which vocab_pad_multiple must reproduce.
  if (const CheckpointShapeValue* vp = shape.find("padded_vocab_size"); vp != nullptr && model.vocab_pad_multiple > 0) {
    const std::string name = "model.vocab_pad_multiple";
    if (written(name)) {
      GPT_CHECK(padded(model.vocab_size, model.vocab_pad_multiple) == vp->value,
                "{}: {} is {}, which pads model.vocab_size {} to {}, but model.init_from's checkpoint has "
                "padded_vocab_size {} ({}); remove {} to take the checkpoint's", origins.at(name), name,
                model.vocab_pad_multiple, model.vocab_size, padded(model.vocab_size, model.vocab_pad_multiple),
                vp->value, vp->source, name);
    } else if (padded(model.vocab_size, model.vocab_pad_multiple) != vp->value) {
      model.vocab_pad_multiple = smallest_pad_multiple(model.vocab_size, vp->value);
      origins[name] = vp->source;
      taken.push_back(fmt::format("vocab_pad_multiple {} (padded_vocab_size {})", model.vocab_pad_multiple, vp->value));
    }
  }
  if (!taken.empty()) spdlog::info("model.init_from {}: {} from the checkpoint", model.init_from, fmt::join(taken, ", "));
}

}  // namespace gpt::config_detail
