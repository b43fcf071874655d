#include "model/fp8_gemms.h"

#include "core/error.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

namespace gpt {

const char* fp8_linear_name(Fp8Linear linear) {
  static constexpr const char* kNames[] = {"qkv", "attn_proj", "fc", "fc_proj"};
  return kNames[static_cast<int>(linear)];
}

namespace {

const char* operand_name(Fp8Operand operand) {
  static constexpr const char* kNames[] = {"input", "weight", "output_grad"};
  return kNames[static_cast<int>(operand)];
}

}  // namespace

Fp8Gemms::Fp8Gemms(const PrecisionRecipe& recipe, int n_layer, Backend& backend)
    : backend_(backend), table_(recipe.fp8.scaling), e5m2_backward_(recipe.fp8.backward == Fp8Backward::E5M2) {
  GPT_CHECK(recipe.recipe == RecipeKind::Fp8, "FP8 linear layers need the fp8 recipe, not {}", recipe_name(recipe.recipe));
  slot_.resize(static_cast<size_t>(n_layer));
  for (int l = 0; l < n_layer; ++l) {
    for (int i = 0; i < static_cast<int>(Fp8Linear::Count); ++i) {
      for (int o = 0; o < static_cast<int>(Fp8Operand::Count); ++o) {
        const auto operand = static_cast<Fp8Operand>(o);
        const bool scaled = recipe.layer_uses_fp8(l, n_layer) && (operand != Fp8Operand::OutputGrad || e5m2_backward_);
        slot_[l][i][o] = -1;
        if (!scaled) continue;
        const std::string name =
            "block" + std::to_string(l) + "." + fp8_linear_name(static_cast<Fp8Linear>(i)) + "." + operand_name(operand);
        slot_[l][i][o] = static_cast<int>(table_.add(name, operand == Fp8Operand::OutputGrad ? DType::E5M2 : DType::E4M3));
      }
    }
  }
  const auto n = static_cast<int64_t>(std::max<size_t>(table_.size(), 1));
  ArenaLayout layout("fp8_state");
  layout.add("amax", {n}, DType::F32);
  layout.add("counts", {n, 2}, DType::I32);
  layout.add("current", {1}, DType::F32);
  state_ = std::make_unique<Arena>(std::move(layout), backend_);
  amax_ = state_->tensor("amax");
  counts_ = state_->tensor("counts");
  current_ = state_->tensor("current");
  backend_.fill({amax_, 0.0f});
  backend_.fill({counts_, 0.0f});
  host_amax_.resize(static_cast<size_t>(n));
  host_counts_.resize(static_cast<size_t>(2 * n));
  values_.assign(static_cast<size_t>(n), 0);
}

Fp8Gemms::~Fp8Gemms() = default;

void Fp8Gemms::quantize(const Tensor& out, const Tensor& in, int layer, Fp8Linear linear, Fp8Operand operand) {
  const int i = slot_.at(static_cast<size_t>(layer))[static_cast<int>(linear)][static_cast<int>(operand)];
  GPT_CHECK(i >= 0, "block {} {} {} is not cast to FP8", layer, fp8_linear_name(linear), operand_name(operand));
  Fp8TensorScaling& scaling = table_[static_cast<size_t>(i)];
  if (!delayed()) {
    // Current scaling: the scale comes from this tensor's own amax, read before the cast.
    backend_.amax({current_, in});
    float amax = 0.0f;
    backend_.copy_to_host(&amax, current_.data, sizeof(float));
    scaling.set_current(amax);
  }
  QuantizeRoundtripArgs q;
  q.out = out;
  q.in = in;
  q.format = scaling.format();
  q.scale = scaling.scale();
  q.amax = amax_.elements(i, 1);
  q.counts = counts_.reshaped({counts_.numel()}).elements(2 * i, 2);
  backend_.quantize_roundtrip(q);
  values_[static_cast<size_t>(i)] += in.numel();
}

std::span<float> Fp8Gemms::finish_step(Fp8StepStats& stats) {
  const size_t n = table_.size();
  stats = Fp8StepStats{};
  if (n == 0) return {};
  backend_.copy_to_host(host_amax_.data(), amax_.data, n * sizeof(float));
  backend_.copy_to_host(host_counts_.data(), counts_.data, 2 * n * sizeof(int32_t));
  stats.scale_min = std::numeric_limits<float>::infinity();
  for (size_t i = 0; i < n; ++i) {
    const float scale = table_[i].scale();
    stats.scale_min = std::min(stats.scale_min, scale);
    stats.scale_max = std::max(stats.scale_max, scale);
    // NaN compares false: a non-finite amax must show, so it is taken as it is.
    if (!(host_amax_[i] <= stats.amax_max)) stats.amax_max = host_amax_[i];
    stats.values += values_[i];
    stats.underflows += host_counts_[2 * i];
    stats.saturated += host_counts_[2 * i + 1];
  }
  discard_step();
  return {host_amax_.data(), n};
}

void Fp8Gemms::discard_step() {
  backend_.fill({amax_, 0.0f});
  backend_.fill({counts_, 0.0f});
  std::fill(values_.begin(), values_.end(), 0);
}

void Fp8Gemms::update_scales(std::span<const float> amaxes) {
  if (delayed()) table_.update(amaxes);
}

}  // namespace gpt
