#include "precision/recipe.h"

#include "core/error.h"

#include <algorithm>

namespace gpt {

std::string_view recipe_name(RecipeKind kind) {
  switch (kind) {
    case RecipeKind::Fp32: return "fp32";
    case RecipeKind::Bf16: return "bf16";
    case RecipeKind::Fp16: return "fp16";
    case RecipeKind::Fp8: return "fp8";
  }
  return "?";
}

RecipeKind parse_recipe(std::string_view name) {
  for (RecipeKind k : {RecipeKind::Fp32, RecipeKind::Bf16, RecipeKind::Fp16, RecipeKind::Fp8})
    if (recipe_name(k) == name) return k;
  GPT_FAIL("unknown precision recipe '{}': expected fp32, bf16, fp16 or fp8", name);
}

std::string_view fp8_backward_name(Fp8Backward backward) { return backward == Fp8Backward::Bf16 ? "bf16" : "e5m2"; }

Fp8Backward parse_fp8_backward(std::string_view name) {
  if (name == "bf16") return Fp8Backward::Bf16;
  if (name == "e5m2") return Fp8Backward::E5M2;
  GPT_FAIL("unknown fp8 backward format '{}': expected bf16 or e5m2", name);
}

DType PrecisionRecipe::compute_dtype() const {
  switch (recipe) {
    case RecipeKind::Fp32: return DType::F32;
    case RecipeKind::Bf16: return DType::BF16;
    case RecipeKind::Fp16: return DType::F16;
    case RecipeKind::Fp8: return DType::BF16;
  }
  return DType::F32;
}

bool PrecisionRecipe::layer_uses_fp8(int layer, int n_layer) const {
  if (recipe != RecipeKind::Fp8) return false;
  for (int l : fp8.bf16_layers)
    if ((l < 0 ? n_layer + l : l) == layer) return false;
  return true;
}

void PrecisionRecipe::validate(int n_layer) const {
  GPT_CHECK(grad_dtype == DType::F32 || grad_dtype == compute_dtype(),
            "precision.grad_dtype {} must be f32 or the recipe's compute dtype {} (recipe {})", dtype_name(grad_dtype),
            dtype_name(compute_dtype()), recipe_name(recipe));
  if (uses_loss_scaling()) loss_scale.validate();
  if (recipe != RecipeKind::Fp8) return;
  fp8.scaling.validate();
  for (size_t i = 0; i < fp8.bf16_layers.size(); ++i) {
    const int l = fp8.bf16_layers[i];
    GPT_CHECK(l >= -n_layer && l < n_layer, "precision.fp8.bf16_layers: block {} is outside [-{}, {}) for n_layer {}", l,
              n_layer, n_layer, n_layer);
  }
}

void PrecisionRecipe::check_fp8_products(const BackendCapabilities& backend, int64_t n_embd, int n_layer,
                                         std::string_view bf16_setting) const {
  bool fp8_products = false;
  for (int l = 0; l < n_layer; ++l) fp8_products = fp8_products || layer_uses_fp8(l, n_layer);
  if (!fp8_products) return;
  GPT_CHECK(backend.fp8_products_unavailable.empty(), "the fp8 recipe multiplies in FP8, and {}; {} runs there",
            backend.fp8_products_unavailable, bf16_setting);
  const int64_t m = backend.fp8_width_multiple;
  if (n_embd % m == 0) return;
  const int64_t below = n_embd / m * m, above = below + m;
  GPT_FAIL("the fp8 recipe multiplies the linear layers' widths in FP8, which this backend takes in multiples of {} "
           "only, and model.n_embd is {}: use n_embd {}, or {}", m, n_embd,
           below == 0 ? fmt::format("{}", above) : fmt::format("{} or {}", below, above), bf16_setting);
}

PrecisionRecipe precision_recipe(const PrecisionConfig& config) {
  PrecisionRecipe r;
  r.recipe = parse_recipe(config.recipe);
  r.loss_scale.initial_scale = config.loss_scale_initial;
  r.loss_scale.growth_factor = config.loss_scale_growth_factor;
  r.loss_scale.backoff_factor = config.loss_scale_backoff_factor;
  r.loss_scale.growth_interval = config.loss_scale_growth_interval;
  r.loss_scale.dynamic = !config.loss_scale_static;
  r.loss_scale.max_scale = std::max(r.loss_scale.max_scale, config.loss_scale_initial);
  r.loss_scale.min_scale = std::min(r.loss_scale.min_scale, config.loss_scale_initial);
  r.grad_dtype = config.grad_dtype == "bf16" ? DType::BF16 : config.grad_dtype == "fp16" ? DType::F16 : DType::F32;
  r.fp8.backward = parse_fp8_backward(config.fp8_backward);
  r.fp8.scaling.mode = parse_fp8_scaling_mode(config.fp8_scaling);
  r.fp8.scaling.amax_history = config.fp8_amax_history;
  r.fp8.scaling.algorithm = parse_amax_algorithm(config.fp8_amax_algorithm);
  r.fp8.scaling.margin = config.fp8_margin;
  GPT_CHECK(config.fp8_bf16_layers >= 0, "precision.fp8.bf16_layers must be >= 0, got {}", config.fp8_bf16_layers);
  for (int i = 0; i < config.fp8_bf16_layers; ++i) {
    r.fp8.bf16_layers.push_back(i);
    r.fp8.bf16_layers.push_back(-1 - i);
  }
  return r;
}

}  // namespace gpt
