#include "optim/adamw.h"

#include "core/error.h"

#include <algorithm>
#include <chrono>
#include <optional>

namespace gpt {
namespace {

const char* kind_name(ParamKind kind) {
  switch (kind) {
    case ParamKind::Embedding: return "embedding";
    case ParamKind::LayerNorm: return "layernorm";
    case ParamKind::Bias: return "bias";
    case ParamKind::Matrix: return "matrix";
  }
  return "?";
}

std::vector<ParamRange> whole_tensors(const ParameterLayout& layout) {
  std::vector<ParamRange> ranges;
  for (size_t i = 0; i < layout.specs().size(); ++i) {
    const ArenaBuffer& b = layout.arena_layout().buffer(i);
    ranges.push_back({i, 0, static_cast<int64_t>(b.bytes / dtype_size(b.dtype))});
  }
  return ranges;
}

// One buffer per range, in the parameters' dtype unless `dtype` says another (the gradients' host copy).
ArenaLayout moments_layout(const char* name, const ParameterLayout& layout, const std::vector<ParamRange>& ranges,
                           std::optional<DType> dtype = std::nullopt) {
  ArenaLayout moments(name);
  for (const ParamRange& r : ranges) {
    GPT_CHECK(r.tensor < layout.specs().size(), "AdamW range of parameter tensor {}, the model has {}", r.tensor,
              layout.specs().size());
    const ArenaBuffer& b = layout.arena_layout().buffer(r.tensor);
    GPT_CHECK(r.offset >= 0 && r.count >= 0 && static_cast<size_t>(r.offset + r.count) * dtype_size(b.dtype) <= b.bytes,
              "AdamW range [{}, {}) outside parameter '{}'", r.offset, r.offset + r.count, b.name);
    moments.add(b.name, {r.count}, dtype.value_or(b.dtype));
  }
  return moments;
}

}  // namespace

AdamW::AdamW(const OptimConfig& config, const ParameterLayout& layout, Backend& backend)
    : AdamW(config, layout, backend, whole_tensors(layout)) {}

AdamW::AdamW(const OptimConfig& config, const ParameterLayout& layout, Backend& backend, std::vector<ParamRange> ranges)
    : AdamW(config, layout, backend, std::move(ranges), nullptr, DType::F32) {}

AdamW::AdamW(const OptimConfig& config, const ParameterLayout& layout, Backend& backend, std::vector<ParamRange> ranges,
             Backend& host, DType grad_dtype)
    : AdamW(config, layout, backend, std::move(ranges), &host, grad_dtype) {}

AdamW::AdamW(const OptimConfig& config, const ParameterLayout& layout, Backend& backend, std::vector<ParamRange> ranges,
             Backend* host, DType grad_dtype)
    : config_(config), layout_(layout), backend_(backend), ranges_(std::move(ranges)),
      owns_all_(ranges_ == whole_tensors(layout)), host_(host),
      m_(moments_layout("adamw_m", layout, ranges_), state_backend()),
      v_(moments_layout("adamw_v", layout, ranges_), state_backend()) {
  for (const ParamRange& r : ranges_) num_elements_ += r.count;
  for (Arena* arena : {&m_, &v_})
    if (arena->layout().total_bytes() > 0)
      state_backend().fill({Tensor(arena->base(), {static_cast<int64_t>(arena->layout().total_bytes() / 4)}), 0.0f});
  for (const ParamSpec& spec : layout.specs()) {
    const auto& nd = config.no_decay;
    decays_.push_back(std::find(nd.begin(), nd.end(), kind_name(spec.kind)) == nd.end());
  }
  if (host_ != nullptr) {
    host_masters_ = std::make_unique<Arena>(moments_layout("offload_masters", layout, ranges_), *host_);
    host_grads_ = std::make_unique<Arena>(moments_layout("offload_gradients", layout, ranges_, grad_dtype), *host_);
    staged_blocks_.assign(ranges_.size(), 0);
  }
}

Tensor AdamW::range_view(Arena& arena, size_t i) {
  const ParamRange& r = ranges_[i];
  Tensor t = arena.tensor(r.tensor);
  return owns_all_ ? t : t.elements(r.offset, r.count);
}

void AdamW::update(size_t i, const Tensor& params, const Tensor& grads, double lr, double grad_scale) {
  if (ranges_[i].count == 0) return;
  AdamWArgs a;
  a.params = params;
  a.grads = grads;
  a.m = m_.tensor(i);
  a.v = v_.tensor(i);
  a.lr = static_cast<float>(lr);
  a.beta1 = static_cast<float>(config_.beta1);
  a.beta2 = static_cast<float>(config_.beta2);
  a.eps = static_cast<float>(config_.eps);
  a.weight_decay = decays_[ranges_[i].tensor] ? static_cast<float>(config_.weight_decay) : 0.0f;
  a.grad_scale = static_cast<float>(grad_scale);
  a.step = step_count_;
  state_backend().adamw_update(a);
}

void AdamW::stage_gradients(int block, Arena& grads) {
  if (host_ == nullptr) return;
  GPT_CHECK(owns_all_, "AdamW::stage_gradients: this optimizer owns a shard; its gradients are final only after "
            "the reduce-scatter, which the update copies");
  for (size_t i = 0; i < ranges_.size(); ++i) {
    const ArenaBuffer& b = layout_.arena_layout().buffer(ranges_[i].tensor);
    Tensor device = grads.tensor(ranges_[i].tensor), host = host_grads_->tensor(i);
    if (outside_blocks(layout_.specs()[ranges_[i].tensor].name)) {
      if (block != -1) continue;
    } else {
      if (block < 0) continue;
      const int64_t per_block = device.numel() / b.shape[0];
      device = device.elements(block * per_block, per_block);
      host = host.elements(block * per_block, per_block);
    }
    backend_.copy_to_host(host.data, device.data, device.bytes());
    ++staged_blocks_[i];
  }
}

void AdamW::forget_staged_gradients() { std::fill(staged_blocks_.begin(), staged_blocks_.end(), 0); }

void AdamW::host_update(size_t i, const Tensor& params, const Tensor& grads, double lr, double grad_scale) {
  if (ranges_[i].count == 0) return;
  Tensor masters = host_masters_->tensor(i), host_grads = host_grads_->tensor(i);
  GPT_CHECK(grads.dtype == host_grads.dtype && grads.numel() == host_grads.numel(),
            "offloaded AdamW: range {} has {} {} gradients, its host copy holds {} {}", i, grads.numel(),
            dtype_name(grads.dtype), host_grads.numel(), dtype_name(host_grads.dtype));
  // A range is copied whole unless every slice of it was staged during backward.
  const ArenaBuffer& b = layout_.arena_layout().buffer(ranges_[i].tensor);
  const int slices = owns_all_ && !outside_blocks(layout_.specs()[ranges_[i].tensor].name) ? static_cast<int>(b.shape[0]) : 1;
  if (!owns_all_ || staged_blocks_[i] < slices) backend_.copy_to_host(host_grads.data, grads.data, grads.bytes());
  update(i, masters, host_grads, lr, grad_scale);
  backend_.copy_to_device(params.data, masters.data, masters.bytes());
}

template <class Grads>
void AdamW::update_all(Arena& params, const Grads& grads_of, double lr, double grad_scale) {
  ++step_count_;
  if (host_ == nullptr) {
    for (size_t i = 0; i < ranges_.size(); ++i) update(i, range_view(params, i), grads_of(i), lr, grad_scale);
    return;
  }
  const auto start = std::chrono::steady_clock::now();
  if (!masters_loaded_) {
    for (size_t i = 0; i < ranges_.size(); ++i) {
      const Tensor device = range_view(params, i);
      backend_.copy_to_host(host_masters_->tensor(i).data, device.data, device.bytes());
    }
    masters_loaded_ = true;
  }
  for (size_t i = 0; i < ranges_.size(); ++i) host_update(i, range_view(params, i), grads_of(i), lr, grad_scale);
  forget_staged_gradients();
  last_host_ms_ = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

void AdamW::step(Arena& params, Arena& grads, double lr, double grad_scale) {
  update_all(params, [&](size_t i) { return range_view(grads, i); }, lr, grad_scale);
}

void AdamW::step(Arena& params, std::span<const Tensor> grads, double lr, double grad_scale) {
  GPT_CHECK(grads.size() == ranges_.size(), "AdamW::step: {} gradient views for {} ranges", grads.size(),
            ranges_.size());
  for (size_t i = 0; i < ranges_.size(); ++i)
    GPT_CHECK(grads[i].numel() == ranges_[i].count, "AdamW::step: range {} has {} elements, its gradient view {}", i,
              ranges_[i].count, grads[i].numel());
  update_all(params, [&](size_t i) { return grads[i]; }, lr, grad_scale);
}

std::vector<float> AdamW::state_to_host() {
  std::vector<float> flat;
  flat.reserve(2 * static_cast<size_t>(num_elements_));
  for (Arena* arena : {&m_, &v_}) {
    for (size_t i = 0; i < ranges_.size(); ++i) {
      Tensor t = arena->tensor(i);
      GPT_CHECK(t.dtype == DType::F32, "optimizer state checkpoints are f32");
      const size_t old = flat.size();
      flat.resize(old + static_cast<size_t>(t.numel()));
      state_backend().copy_to_host(flat.data() + old, t.data, t.bytes());
    }
  }
  return flat;
}

void AdamW::state_from_host(std::span<const float> flat, int64_t step_count) {
  GPT_CHECK(flat.size() == 2 * static_cast<size_t>(num_elements_), "optimizer state has {} values, expected {}",
            flat.size(), 2 * num_elements_);
  size_t offset = 0;
  for (Arena* arena : {&m_, &v_}) {
    for (size_t i = 0; i < ranges_.size(); ++i) {
      Tensor t = arena->tensor(i);
      state_backend().copy_to_device(t.data, flat.data() + offset, t.bytes());
      offset += static_cast<size_t>(t.numel());
    }
  }
  step_count_ = step_count;
  masters_loaded_ = false;  // the weights were loaded beside the state: the next update takes its masters from them
}

}  // namespace gpt
