// The model shape a checkpoint states in its headers, read without touching the weights: what
// model.init_from fills the model section from at config load, so the planner, the ledger and every
// subcommand see the checkpoint's real shape before anything is allocated.
#pragma once

#include <string>
#include <vector>

namespace gpt {

struct CheckpointShapeValue {
  std::string key;     // the model key it gives: vocab_size, context_length, n_layer, n_head, n_embd, or
                       // padded_vocab_size (llm.c files only; it decides model.vocab_pad_multiple)
  int value = 0;
  std::string source;  // where it was read, for messages: "models/gpt2/config.json: n_layer"
};

struct CheckpointShape {
  std::vector<CheckpointShapeValue> values;
  // Why a key the checkpoint does not give is missing (empty when every shape key is there): a bare
  // .safetensors file states no number of heads.
  std::string missing_reason;
  const CheckpointShapeValue* find(const std::string& key) const;
};

// The shape of an llm.c model file (its header) or a Hugging Face GPT-2 checkpoint (config.json where there
// is one, else the safetensors header's tensor shapes), as model.init_from names it. Throws naming the file
// when it is missing or its header is malformed.
CheckpointShape read_checkpoint_shape(const std::string& init_from);

}  // namespace gpt
