#include "bench/flops.h"

#include "layout/parameter_layout.h"

namespace gpt::bench {

int64_t gpt2_parameter_count(const ModelConfig& model) {
  const int64_t C = model.n_embd, L = model.n_layer;
  const int64_t per_block = 2 * C             // ln1 weight, bias
                            + 3 * C * C + 3 * C  // qkv weight, bias
                            + C * C + C          // attention projection
                            + 2 * C              // ln2
                            + 4 * C * C + 4 * C  // fc
                            + 4 * C * C + C;     // fc projection
  return static_cast<int64_t>(model.padded_vocab_size()) * C + static_cast<int64_t>(model.context_length) * C +
         L * per_block + 2 * C;
}

ModelFlops model_flops(const ModelConfig& model, int seq_len, const LoraSpec& lora) {
  ModelFlops f;
  f.parameters = gpt2_parameter_count(model);
  f.position_embedding = static_cast<int64_t>(model.context_length) * model.n_embd;
  f.counted_parameters = f.parameters - f.position_embedding;
  f.dense_per_token = 6.0 * static_cast<double>(f.counted_parameters);
  if (lora.enabled()) {
    f.adapter_parameters = lora_parameter_layout(model, lora, DType::F32).num_parameters();
    f.dense_per_token =
        4.0 * static_cast<double>(f.counted_parameters) + 6.0 * static_cast<double>(f.adapter_parameters);
  }
  f.attention_per_token = 12.0 * model.n_layer * static_cast<double>(seq_len) * model.n_embd;
  return f;
}

}  // namespace gpt::bench
