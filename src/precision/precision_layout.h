// The precision layout: for a recipe, which storage format and which FP8 scaling slot every tensor of the
// model takes. It is the one place that decides; the activation plan and its ledger, the FP8 scaling
// state, the compute copy of the weights and the model's views all ask it.
//
//   tensor                                       fp32    bf16/fp16     fp8 (FP8 block)     fp8 (bf16 block)
//   activations and activation gradients         master  compute       bf16                bf16
//   ln1, atty, ln2, fch_gelu (linear inputs)     master  compute       e4m3, own slot      bf16
//   LayerNorm mean/rstd, probs, losses           master  master        master              master
//   linear weights' compute copy                 -       compute       e4m3, own slot      bf16
//   other weights' compute copy                  -       compute       bf16                bf16
//   a linear layer's output gradient, backward   master  compute       e5m2 copy, own slot (backward e5m2)
//   parameter gradients                          master  grad_dtype    grad_dtype          grad_dtype
// master is F32 (F64 for the gradient checks); compute is the recipe's BF16 or F16.
//
// Producers that cannot store FP8 directly write a wider source first, then a cast stores it, as the
// GPU does: attention's output is BF16 (the attention kernel's own output format) before its E4M3 cast,
// and under current scaling every FP8 input is produced in FP32 first, because its scale comes from
// its own amax (a reduction before the cast, Transformer Engine's Float8CurrentScaling). Under delayed
// scaling LayerNorm and GELU store E4M3 directly (the cast fused into the op).
//
// FP8 scaling slots, in the order checkpoints keep them: for each FP8 block l and each of its linear
// layers (qkv, attn_proj, fc, fc_proj), the input, the weight and (backward e5m2) the output gradient,
// named "block<l>.<linear>.<operand>".
#pragma once

#include "core/dtype.h"
#include "precision/recipe.h"

#include <array>
#include <string>
#include <string_view>
#include <vector>

namespace gpt {

// The activations of one transformer block.
enum class BlockTensor { Ln1, Ln1Mean, Ln1Rstd, Qkv, Atty, Probs, Residual2, Ln2, Ln2Mean, Ln2Rstd, Fch, FchGelu, Out, Count };
inline constexpr int kBlockTensors = static_cast<int>(BlockTensor::Count);
const char* block_tensor_name(BlockTensor t);

// The activation buffers outside the blocks: inputs, the head, and the scratch every block reuses.
enum class ModelTensor {
  Tokens, Targets, Encoded, Lnf, LnfMean, LnfRstd, Logits, Losses,
  Branch, SumSquares, DResidual, DBranch, DAtty, DQkv, DFch, DProbs,
  Fp8OutputGrad,  // a linear layer's output gradient in E5M2 (fp8, backward e5m2)
  Fp8Source,      // an FP8 input before its cast under current scaling, FP32
  Count
};
inline constexpr int kModelTensors = static_cast<int>(ModelTensor::Count);
const char* model_tensor_name(ModelTensor t);

enum class Fp8Linear { Qkv, AttnProj, Fc, FcProj, Count };
enum class Fp8Operand { Input, Weight, OutputGrad, Count };
inline constexpr int kFp8Linears = static_cast<int>(Fp8Linear::Count);
const char* fp8_linear_name(Fp8Linear linear);
const char* fp8_operand_name(Fp8Operand operand);

// A tensor's storage format and, for FP8, the index of its scaling slot (-1: none).
struct TensorFormat {
  DType dtype = DType::F32;
  int slot = -1;
};

class PrecisionLayout {
 public:
  // master: F32, or F64 for the gradient checks (fp32 recipe only).
  PrecisionLayout(const PrecisionRecipe& recipe, int n_layer, DType master = DType::F32);

  const PrecisionRecipe& recipe() const { return recipe_; }
  int n_layer() const { return n_layer_; }
  DType master() const { return master_; }
  DType compute() const { return compute_; }
  // LayerNorm statistics, softmax probabilities, losses, reductions: the master precision.
  DType statistics() const { return master_; }
  DType gradient() const { return gradient_; }
  // Whether the weights have a compute copy (every recipe but fp32).
  bool compute_weights() const { return compute_ != master_; }

  bool fp8_block(int l) const { return fp8_block_[static_cast<size_t>(l)]; }
  bool any_fp8() const { return slots_.size() > 0; }
  bool e5m2_backward() const { return e5m2_backward_; }
  bool current_scaling() const;

  TensorFormat block(int l, BlockTensor t) const;
  TensorFormat model(ModelTensor t) const;
  // The format the producer of block tensor t writes before the cast into t's own format; equal to
  // block(l, t).dtype when the store is fused into the producing op.
  DType source(int l, BlockTensor t) const;
  // The compute copy of parameter `name` (llm.c's names, layout/parameter_layout.h) in block l (any l for the
  // tensors outside the blocks).
  TensorFormat compute_weight(std::string_view name, int l) const;
  // The output gradient of block l's linear layer as its backward products read it.
  TensorFormat output_grad(int l, Fp8Linear linear) const;

  // The FP8 scaling slots.
  size_t slots() const { return slots_.size(); }
  const std::string& slot_name(size_t i) const { return slots_.at(i).name; }
  DType slot_format(size_t i) const { return slots_.at(i).format; }
  int slot(int l, Fp8Linear linear, Fp8Operand operand) const {
    return slot_[static_cast<size_t>(l)][static_cast<int>(linear)][static_cast<int>(operand)];
  }

 private:
  struct Slot {
    std::string name;
    DType format;
  };
  PrecisionRecipe recipe_;
  int n_layer_;
  DType master_, compute_, gradient_;
  bool e5m2_backward_ = false;
  std::vector<bool> fp8_block_;
  std::vector<Slot> slots_;
  std::vector<std::array<std::array<int, static_cast<int>(Fp8Operand::Count)>, kFp8Linears>> slot_;
};

}  // namespace gpt
