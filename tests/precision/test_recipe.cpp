// Recipes: the dtypes each recipe computes in, the FP8 layers and their exceptions, validation and names.
// Which format a linear layer's operands take is the precision layout's answer, asked here as the model asks.
#include "precision/recipe.h"

#include "precision/precision_layout.h"

#include "core/error.h"
#include "test_util.h"

#include <gtest/gtest.h>

namespace gpt {
namespace {

// The formats of block l's qkv product as the layout gives them: its input (ln1), its weight's compute copy
// and its output gradient in backward.
struct QkvFormats {
  DType input, weight, output_grad;
};
QkvFormats qkv_formats(const PrecisionRecipe& r, int l, int n_layer) {
  const PrecisionLayout layout(r, n_layer);
  return {layout.block(l, BlockTensor::Ln1).dtype, layout.compute_weight("qkvw", l).dtype,
          layout.output_grad(l, Fp8Linear::Qkv).dtype};
}

TEST(PrecisionRecipe, DtypesPerRecipe) {
  PrecisionRecipe r;
  EXPECT_EQ(r.compute_dtype(), DType::F32);
  EXPECT_EQ(qkv_formats(r, 0, 4).input, DType::F32);
  EXPECT_FALSE(r.uses_loss_scaling());
  r.recipe = RecipeKind::Bf16;
  EXPECT_EQ(r.compute_dtype(), DType::BF16);
  EXPECT_EQ(qkv_formats(r, 1, 4).output_grad, DType::BF16);
  EXPECT_EQ(qkv_formats(r, 1, 4).weight, DType::BF16);
  r.recipe = RecipeKind::Fp16;
  EXPECT_EQ(r.compute_dtype(), DType::F16);
  EXPECT_TRUE(r.uses_loss_scaling());
  r.recipe = RecipeKind::Fp8;
  EXPECT_EQ(r.compute_dtype(), DType::BF16);
  EXPECT_EQ(qkv_formats(r, 2, 4).input, DType::E4M3);
  EXPECT_EQ(qkv_formats(r, 2, 4).weight, DType::E4M3);
  EXPECT_EQ(qkv_formats(r, 2, 4).output_grad, DType::E5M2);
  r.fp8.backward = Fp8Backward::Bf16;
  EXPECT_EQ(qkv_formats(r, 2, 4).output_grad, DType::BF16);
  EXPECT_EQ(qkv_formats(r, 2, 4).input, DType::E4M3);
}

TEST(PrecisionRecipe, Bf16LayersStayOutOfFp8) {
  PrecisionRecipe r;
  r.recipe = RecipeKind::Fp8;
  r.fp8.bf16_layers = {0, -1};
  const int n = 6;
  for (int l = 0; l < n; ++l) {
    const bool fp8 = l != 0 && l != n - 1;
    EXPECT_EQ(r.layer_uses_fp8(l, n), fp8) << l;
    EXPECT_EQ(qkv_formats(r, l, n).input, fp8 ? DType::E4M3 : DType::BF16) << l;
    EXPECT_EQ(qkv_formats(r, l, n).output_grad, fp8 ? DType::E5M2 : DType::BF16) << l;
  }
  EXPECT_NO_THROW(r.validate(n));
  r.fp8.bf16_layers = {6};
  EXPECT_NE(test::error_message([&] { r.validate(n); }).find("precision.fp8.bf16_layers"), std::string::npos);
  r.fp8.bf16_layers = {-7};
  EXPECT_THROW(r.validate(n), Error);
}

TEST(PrecisionRecipe, ValidatesGradDtypeAndSubConfigs) {
  PrecisionRecipe r;
  r.recipe = RecipeKind::Bf16;
  r.grad_dtype = DType::BF16;
  EXPECT_NO_THROW(r.validate(4));
  r.grad_dtype = DType::F16;
  EXPECT_NE(test::error_message([&] { r.validate(4); }).find("precision.grad_dtype"), std::string::npos);
  r.recipe = RecipeKind::Fp16;
  EXPECT_NO_THROW(r.validate(4));
  r.loss_scale.growth_interval = 0;
  EXPECT_THROW(r.validate(4), Error);
  r.recipe = RecipeKind::Bf16;
  r.grad_dtype = DType::F32;
  EXPECT_NO_THROW(r.validate(4)) << "loss scaling settings are only checked when fp16 uses them";
  r.recipe = RecipeKind::Fp8;
  r.fp8.scaling.amax_history = 0;
  EXPECT_THROW(r.validate(4), Error);
}

TEST(PrecisionRecipe, NamesRoundTrip) {
  for (RecipeKind k : {RecipeKind::Fp32, RecipeKind::Bf16, RecipeKind::Fp16, RecipeKind::Fp8})
    EXPECT_EQ(parse_recipe(recipe_name(k)), k);
  for (Fp8Backward b : {Fp8Backward::Bf16, Fp8Backward::E5M2}) EXPECT_EQ(parse_fp8_backward(fp8_backward_name(b)), b);
  EXPECT_NE(test::error_message([] { parse_recipe("fp4"); }).find("fp32, bf16, fp16 or fp8"), std::string::npos);
}

}  // namespace
}  // namespace gpt
