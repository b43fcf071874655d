#include "io/checkpoint_shape.h"

#include "io/hf_gpt2.h"
#include "io/llmc_model_file.h"

#include <fmt/format.h>

namespace gpt {

const CheckpointShapeValue* CheckpointShape::find(const std::string& key) const {
  for (const CheckpointShapeValue& v : values)
    if (v.key == key) return &v;
  return nullptr;
}

CheckpointShape read_checkpoint_shape(const std::string& init_from) {
  if (is_hf_checkpoint(init_from)) return read_hf_gpt2_shape(init_from);
  const LlmcModelHeader h = read_llmc_header_fields(init_from);
  const auto field = [&](const char* key, int value, const char* name) {
    return CheckpointShapeValue{key, value, fmt::format("{} header: {}", init_from, name)};
  };
  return {{field("vocab_size", h.vocab_size, "vocab_size"), field("context_length", h.max_seq_len, "max_seq_len"),
           field("n_layer", h.num_layers, "num_layers"), field("n_head", h.num_heads, "num_heads"),
           field("n_embd", h.channels, "channels"), field("padded_vocab_size", h.padded_vocab_size, "padded_vocab_size")},
          ""};
}

}  // namespace gpt
