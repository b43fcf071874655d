#include "precision/precision_layout.h"

#include "core/error.h"

namespace gpt {

const char* block_tensor_name(BlockTensor t) {
  static constexpr const char* kNames[] = {"ln1", "ln1_mean", "ln1_rstd", "qkv", "atty", "probs", "residual2",
                                           "ln2", "ln2_mean", "ln2_rstd", "fch", "fch_gelu", "out"};
  return kNames[static_cast<int>(t)];
}

const char* model_tensor_name(ModelTensor t) {
  static constexpr const char* kNames[] = {"tokens", "targets", "encoded", "lnf", "lnf_mean", "lnf_rstd",
                                           "logits", "losses", "branch", "sum_squares", "dresidual", "dbranch",
                                           "datty", "dqkv", "dfch", "dprobs", "fp8.output_grad", "fp8.source"};
  return kNames[static_cast<int>(t)];
}

const char* fp8_linear_name(Fp8Linear linear) {
  static constexpr const char* kNames[] = {"qkv", "attn_proj", "fc", "fc_proj"};
  return kNames[static_cast<int>(linear)];
}

const char* fp8_operand_name(Fp8Operand operand) {
  static constexpr const char* kNames[] = {"input", "weight", "output_grad"};
  return kNames[static_cast<int>(operand)];
}

namespace {

// The linear layer whose input block tensor t is, or Count.
Fp8Linear input_of(BlockTensor t) {
  switch (t) {
    case BlockTensor::Ln1: return Fp8Linear::Qkv;
    case BlockTensor::Atty: return Fp8Linear::AttnProj;
    case BlockTensor::Ln2: return Fp8Linear::Fc;
    case BlockTensor::FchGelu: return Fp8Linear::FcProj;
    default: return Fp8Linear::Count;
  }
}

Fp8Linear weight_of(std::string_view name) {
  if (name == "qkvw") return Fp8Linear::Qkv;
  if (name == "attprojw") return Fp8Linear::AttnProj;
  if (name == "fcw") return Fp8Linear::Fc;
  if (name == "fcprojw") return Fp8Linear::FcProj;
  return Fp8Linear::Count;
}

}  // namespace

PrecisionLayout::PrecisionLayout(const PrecisionRecipe& recipe, int n_layer, DType master)
    : recipe_(recipe), n_layer_(n_layer), master_(master) {
  GPT_CHECK(master == DType::F32 || master == DType::F64, "master weights must be f32 or f64, not {}", dtype_name(master));
  recipe.validate(n_layer);
  compute_ = recipe.recipe == RecipeKind::Fp32 ? master : recipe.compute_dtype();
  gradient_ = recipe.grad_dtype == DType::F32 ? master : recipe.grad_dtype;
  if (compute_ != master || gradient_ != master)
    GPT_CHECK(master == DType::F32, "mixed precision needs F32 master weights, not {}", dtype_name(master));
  e5m2_backward_ = recipe.recipe == RecipeKind::Fp8 && recipe.fp8.backward == Fp8Backward::E5M2;
  fp8_block_.resize(static_cast<size_t>(n_layer));
  slot_.resize(static_cast<size_t>(n_layer));
  for (int l = 0; l < n_layer; ++l) {
    fp8_block_[l] = recipe.layer_uses_fp8(l, n_layer);
    for (int i = 0; i < kFp8Linears; ++i) {
      for (int o = 0; o < static_cast<int>(Fp8Operand::Count); ++o) {
        const auto operand = static_cast<Fp8Operand>(o);
        int& s = slot_[l][i][o];
        s = -1;
        if (!fp8_block_[l] || (operand == Fp8Operand::OutputGrad && !e5m2_backward_)) continue;
        s = static_cast<int>(slots_.size());
        slots_.push_back({"block" + std::to_string(l) + "." + fp8_linear_name(static_cast<Fp8Linear>(i)) + "." +
                              fp8_operand_name(operand),
                          operand == Fp8Operand::OutputGrad ? DType::E5M2 : DType::E4M3});
      }
    }
  }
}

bool PrecisionLayout::current_scaling() const {
  return any_fp8() && recipe_.fp8.scaling.mode == Fp8ScalingMode::Current;
}

TensorFormat PrecisionLayout::block(int l, BlockTensor t) const {
  switch (t) {
    case BlockTensor::Ln1Mean: case BlockTensor::Ln1Rstd: case BlockTensor::Ln2Mean: case BlockTensor::Ln2Rstd:
    case BlockTensor::Probs:
      return {statistics(), -1};
    default: break;
  }
  const Fp8Linear linear = input_of(t);
  if (linear != Fp8Linear::Count && fp8_block(l)) return {DType::E4M3, slot(l, linear, Fp8Operand::Input)};
  return {compute_, -1};
}

DType PrecisionLayout::source(int l, BlockTensor t) const {
  const TensorFormat f = block(l, t);
  if (f.slot < 0) return f.dtype;
  if (t == BlockTensor::Atty) return compute_;
  return current_scaling() ? DType::F32 : f.dtype;
}

TensorFormat PrecisionLayout::model(ModelTensor t) const {
  switch (t) {
    case ModelTensor::Tokens: case ModelTensor::Targets: return {DType::I32, -1};
    case ModelTensor::LnfMean: case ModelTensor::LnfRstd: case ModelTensor::Losses: case ModelTensor::SumSquares:
    case ModelTensor::DProbs:
      return {statistics(), -1};
    case ModelTensor::Fp8OutputGrad: return {DType::E5M2, -1};
    case ModelTensor::Fp8Source: return {DType::F32, -1};
    default: return {compute_, -1};
  }
}

TensorFormat PrecisionLayout::compute_weight(std::string_view name, int l) const {
  const Fp8Linear linear = weight_of(name);
  if (linear != Fp8Linear::Count && fp8_block(l)) return {DType::E4M3, slot(l, linear, Fp8Operand::Weight)};
  return {compute_, -1};
}

TensorFormat PrecisionLayout::output_grad(int l, Fp8Linear linear) const {
  const int s = slot(l, linear, Fp8Operand::OutputGrad);
  return s >= 0 ? TensorFormat{DType::E5M2, s} : TensorFormat{compute_, -1};
}

}  // namespace gpt
