// The activation arena: what the forward pass keeps for backward, plus the backward pass's scratch,
// laid out for the largest micro-batch (B, T) of the run. A smaller batch (evaluation tail, sampling
// with B=1) uses a prefix of each buffer.
#pragma once

#include "config/config.h"
#include "core/arena.h"

namespace gpt {

struct ActivationTensors {
  // Forward, kept for backward. Per-layer buffers are [L, ...].
  Tensor tokens, targets;       // [B,T] i32
  Tensor encoded;               // [B,T,C]
  Tensor ln1, ln1_mean, ln1_rstd;
  Tensor qkv;                   // [L,B,T,3C]
  Tensor atty;                  // [L,B,T,C]
  Tensor probs;                 // [L,B,NH,T,T]
  Tensor attproj, residual2;    // [L,B,T,C]
  Tensor ln2, ln2_mean, ln2_rstd;
  Tensor fch, fch_gelu;         // [L,B,T,4C]
  Tensor fcproj, residual3;     // [L,B,T,C]
  Tensor lnf, lnf_mean, lnf_rstd;
  Tensor logits;                // [B,T,Vp]; the fused cross-entropy overwrites it with dlogits
  Tensor losses;                // [B,T]
  Tensor sum_squares;           // [1], the global-norm reduction's output
  // Backward scratch, reused by every layer.
  Tensor dresidual, dbranch, datty;  // [B,T,C]
  Tensor dqkv;                       // [B,T,3C]
  Tensor dfch;                       // [B,T,4C]
  Tensor dprobs;                     // [B,NH,T,T]
};

ArenaLayout activation_layout(const ModelConfig& model, int batch_size, int seq_len, DType dtype);
ActivationTensors activation_views(Arena& arena);

}  // namespace gpt
