// Model FLOPs of a GPT training step: the numerator of model FLOPs utilisation (MFU).
//
// Convention (nanoGPT's estimate_mfu, after PaLM's appendix B), per token of a step:
//   6 N          forward (2N) and backward (4N) of the parameters' matrix products. N counts every
//                parameter except the position embedding, which is a lookup, not a product; the token
//                embedding counts, padded rows included, because it is also the LM head, which multiplies
//                all Vp rows. (LayerNorm gains and biases, 13 L C + 2 C, are in N too: under 0.1% for GPT-2.)
//   12 L T C     attention's two T x T products per layer (Q K^T and P V: 4 T C forward, 8 T C backward),
//                counting the full T x T square although causal masking makes half of it zeros, as nanoGPT
//                and PaLM do, so numbers compare with theirs.
// Work a step does beyond this, such as the forwards that activation recomputation reruns, is not model
// FLOPs; the bench reports it separately.
//
// LoRA fine-tuning (finetune.lora_rank > 0) trains the adapters only: the frozen weights' products run
// forward (2N) and backward for the input gradient (2N), with no weight gradient, and the adapters'
// N_a = sum over adapted layers of rank x (in + out) parameters cost 6 N_a as trained weights do, so
//   4 N + 6 N_a  per token, plus attention's 12 L T C, which LoRA leaves as it is.
// (The first block's input gradient, which only frozen weights would read, is counted too: the model
// computes it.)
#pragma once

#include "config/config.h"
#include "layout/lora_layout.h"

#include <cstdint>

namespace gpt::bench {

struct ModelFlops {
  int64_t parameters = 0;          // every parameter the model stores (padded vocabulary rows included)
  int64_t position_embedding = 0;  // wpe: context_length x C
  int64_t counted_parameters = 0;  // N = parameters - position_embedding
  int64_t adapter_parameters = 0;  // N_a: the LoRA adapters' (0 without LoRA)
  double dense_per_token = 0.0;    // 6 N, or under LoRA 4 N + 6 N_a
  double attention_per_token = 0.0;  // 12 L T C
  double per_token() const { return dense_per_token + attention_per_token; }
};

// GPT-2's parameter count in closed form: Vp C + maxT C + L (12 C^2 + 13 C) + 2 C.
int64_t gpt2_parameter_count(const ModelConfig& model);
ModelFlops model_flops(const ModelConfig& model, int seq_len, const LoraSpec& lora = {});

}  // namespace gpt::bench
