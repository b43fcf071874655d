#include "precision/fp8_state.h"

#include "core/error.h"

#include <algorithm>
#include <limits>

namespace gpt {

static_assert(sizeof(Fp8Meta) == 5 * sizeof(float), "Fp8Meta is five 4-byte words");

ArenaLayout fp8_state_layout(const PrecisionLayout& layout) {
  ArenaLayout arena("fp8_state");
  arena.add("meta", {static_cast<int64_t>(std::max<size_t>(layout.slots(), 1)), 5}, DType::F32);
  return arena;
}

Fp8State::Fp8State(const PrecisionLayout& layout, Backend& backend)
    : backend_(backend), table_(layout.recipe().fp8.scaling) {
  GPT_CHECK(layout.recipe().recipe == RecipeKind::Fp8, "FP8 scaling state needs the fp8 recipe, not {}",
            recipe_name(layout.recipe().recipe));
  for (size_t i = 0; i < layout.slots(); ++i) table_.add(layout.slot_name(i), layout.slot_format(i));
  GPT_CHECK(table_.size() == layout.slots(), "FP8 scaling table: {} slots for the layout's {}", table_.size(),
            layout.slots());
  arena_ = std::make_unique<Arena>(fp8_state_layout(layout), backend_);
  const auto n = static_cast<int64_t>(std::max<size_t>(table_.size(), 1));
  device_ = static_cast<Fp8Meta*>(arena_->base());
  host_.assign(static_cast<size_t>(n), Fp8Meta{});
  amaxes_.assign(static_cast<size_t>(n), 0.0f);
  values_.assign(static_cast<size_t>(n), 0);
  upload();
}

Fp8State::~Fp8State() = default;

Fp8Meta* Fp8State::meta(int slot) const {
  GPT_CHECK(slot >= 0 && static_cast<size_t>(slot) < table_.size(), "fp8 scaling slot {} outside [0, {})", slot,
            table_.size());
  return device_ + slot;
}

// The table's scales, zero amaxes and counts, to the device.
void Fp8State::upload() {
  for (size_t i = 0; i < table_.size(); ++i) {
    host_[i] = Fp8Meta{};
    host_[i].scale = table_[i].scale();
    host_[i].scale_inv = table_[i].scale_inv();
  }
  backend_.copy_to_device(device_, host_.data(), host_.size() * sizeof(Fp8Meta));
}

std::span<float> Fp8State::finish_step(Fp8StepStats& stats) {
  const size_t n = table_.size();
  stats = Fp8StepStats{};
  if (n == 0) return {};
  backend_.copy_to_host(host_.data(), device_, n * sizeof(Fp8Meta));
  stats.scale_min = std::numeric_limits<float>::infinity();
  for (size_t i = 0; i < n; ++i) {
    const Fp8Meta& m = host_[i];
    if (!delayed()) {
      // The device set the scale from the tensor's amax at each cast; the table keeps the last one.
      Fp8TensorState s = table_[i].state();
      s.scale = m.scale;
      table_[i].load_state(s);
    }
    stats.scale_min = std::min(stats.scale_min, m.scale);
    stats.scale_max = std::max(stats.scale_max, m.scale);
    amaxes_[i] = m.amax;
    // NaN compares false: a non-finite amax must show, so it is taken as it is.
    if (!(m.amax <= stats.amax_max)) stats.amax_max = m.amax;
    stats.values += values_[i];
    stats.underflows += m.underflows;
    stats.saturated += m.saturated;
  }
  discard_step();
  return {amaxes_.data(), n};
}

void Fp8State::discard_step() {
  upload();
  std::fill(values_.begin(), values_.end(), 0);
}

void Fp8State::update_scales(std::span<const float> amaxes) {
  if (!delayed()) return;
  table_.update(amaxes);
  upload();
}

void Fp8State::load(std::span<const uint8_t> bytes) {
  table_.deserialize(bytes);
  upload();
}

}  // namespace gpt
