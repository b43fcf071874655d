// Mixed-precision recipes. The FP32 master weights, their gradients' reduction and the optimizer state
// are FP32 in every recipe; a recipe says in which format the forward and backward compute:
//
//   fp32  everything FP32 (the reference).
//   bf16  activations and matrix products in BF16 (FP32 accumulation), weights cast from the FP32 masters
//         each step. BF16 has FP32's range, so no loss scaling.
//   fp16  as bf16 with FP16, whose range is narrow (max 65504, min subnormal 2^-24): the loss is scaled
//         dynamically (LossScaler) and overflowed steps are skipped.
//   fp8   the linear layers' matrix products (qkv, attention projection, fc, fc projection) take FP8
//         operands with per-tensor scales (Fp8ScalingTable): E4M3 activations and weights forward; the
//         backward products use E5M2 output gradients (backward = e5m2, TE's HYBRID format) or stay in
//         BF16 (backward = bf16). Everything else (embeddings, LayerNorm, attention's QK^T and PV, the LM
//         head, the layers in bf16_layers) runs in BF16.
//
// grad_dtype is the dtype parameter gradients are accumulated in across micro-batches: f32 (default,
// the FP32 masters' own precision) or the compute dtype (bf16/f16), which halves their memory.
#pragma once

#include "backend/backend.h"
#include "config/config.h"
#include "core/dtype.h"
#include "precision/fp8_scaling.h"
#include "precision/loss_scaler.h"

#include <string_view>
#include <vector>

namespace gpt {

enum class RecipeKind { Fp32, Bf16, Fp16, Fp8 };
enum class Fp8Backward { Bf16, E5M2 };

std::string_view recipe_name(RecipeKind kind);
RecipeKind parse_recipe(std::string_view name);  // "fp32" | "bf16" | "fp16" | "fp8"
std::string_view fp8_backward_name(Fp8Backward backward);
Fp8Backward parse_fp8_backward(std::string_view name);  // "bf16" | "e5m2"

struct Fp8Recipe {
  Fp8Backward backward = Fp8Backward::E5M2;
  Fp8ScalingConfig scaling;       // delayed|current, amax history, algorithm, margin
  std::vector<int> bf16_layers;   // transformer blocks kept out of FP8; negative indices count from the end (-1: last)
};

struct PrecisionRecipe {
  RecipeKind recipe = RecipeKind::Fp32;
  DType grad_dtype = DType::F32;
  LossScalerConfig loss_scale;    // fp16 only
  Fp8Recipe fp8;                  // fp8 only

  // Activations and the non-FP8 matrix products: F32, BF16, F16; BF16 for fp8. Which format each tensor
  // takes (an FP8 block's operands E4M3, output gradients E5M2, ...) is the precision layout's to say
  // (precision_layout.h), from this and layer_uses_fp8.
  DType compute_dtype() const;
  // Whether block `layer` of n_layer runs its linear layers in FP8.
  bool layer_uses_fp8(int layer, int n_layer) const;
  bool uses_loss_scaling() const { return recipe == RecipeKind::Fp16; }

  // Throws gpt::Error naming the key (precision.grad_dtype, precision.fp8.bf16_layers, ...) when the
  // recipe is inconsistent; n_layer checks bf16_layers against the model.
  void validate(int n_layer) const;
  // Throws when a block of n_layer multiplies in FP8 and the backend cannot (its fp8_products_unavailable)
  // or not at this n_embd (not a multiple of its fp8_width_multiple), saying so and that bf16_setting (the
  // way this command takes a recipe: "precision.recipe: bf16", "--recipe bf16") runs there.
  void check_fp8_products(const BackendCapabilities& backend, int64_t n_embd, int n_layer,
                          std::string_view bf16_setting) const;
};

// The recipe of a run's precision section (see PrecisionConfig): gradients in precision.grad_dtype, the
// FP8 settings from precision.fp8.*. The scaler's max_scale is raised to the initial scale when that is
// larger (and its min_scale lowered to it when that is smaller).
PrecisionRecipe precision_recipe(const PrecisionConfig& config);

}  // namespace gpt
