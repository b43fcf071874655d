// LoRA (Hu et al. 2021): a targeted linear layer y = x W^T + b with W [out, in] frozen becomes
//   y = x W^T + b + s * (drop(x) A^T) B^T,   s = alpha / rank,  A [rank, in],  B [out, rank],
// so its effective weight is W + s B A. B starts at zero (step 0 is the base model); A is drawn as PEFT
// draws it (Kaiming-uniform with a = sqrt(5): U(-1/sqrt(in), 1/sqrt(in))).
//
// Each adapter is two small matrix products forward and four backward, all through Backend::matmul, and
// the dropout on the adapter's input through the residual ops' masks, so every backend runs LoRA with the
// ops it already has. With h = drop(x) A^T [N, rank] (recomputed in backward, not stored: N x rank per
// site is cheap to rebuild and the input is kept or rebuilt anyway):
//   dB += s dout^T h,   dh = s dout B,   dA += dh^T drop(x),   dx += drop_backward(dh A).
#pragma once

#include "backend/backend.h"
#include "core/arena.h"
#include "layout/lora_layout.h"

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace gpt {

// One block's adapters: a[t], b[t] are empty where target t has none.
struct LoraBlock {
  std::array<Tensor, kLoraTargets> a, b;
};
// Views of an arena built from lora_parameter_layout (in any dtype), per block.
std::vector<LoraBlock> lora_block_views(Arena& arena, const LoraSpec& spec, int n_layer);

// Runs one adapter site over the Backend. scratch is an arena from lora_scratch_layout.
class LoraProducts {
 public:
  LoraProducts(Backend& backend, Arena& scratch, const LoraSpec& spec);
  // out += s drop(in) A^T B^T.
  void forward(const Tensor& out, const Tensor& in, const Tensor& a, const Tensor& b, const DropoutSpec& dropout,
               double& flops);
  // dA, dB accumulate; din (which holds the base's dout W) gains the adapter's share.
  void backward(const Tensor& din, const Tensor& dout, const Tensor& in, const Tensor& a, const Tensor& b,
                const Tensor& da, const Tensor& db, const DropoutSpec& dropout, double& flops);
  // The frozen LayerNorm parameters' gradient sinks.
  Tensor frozen_weight_sink() { return scratch_.tensor("frozen_grad_w"); }
  Tensor frozen_bias_sink() { return scratch_.tensor("frozen_grad_b"); }

 private:
  // drop(in) as the products read it: in itself without dropout, else the masked copy in lora_x.
  Tensor dropped_input(const Tensor& in, const DropoutSpec& dropout);
  Tensor rows_by_rank(const char* name, int64_t rows);

  Backend& backend_;
  Arena& scratch_;
  LoraSpec spec_;
};

// The merged weight W + s B A of one block's target, on the host: w [out, in], a [rank, in], b [out, rank]
// row-major, in double accumulation.
void lora_merge_into(std::vector<float>& w, const std::vector<float>& a, const std::vector<float>& b, int64_t out,
                     int64_t in, int rank, double scale);

}  // namespace gpt
