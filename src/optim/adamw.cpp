#include "optim/adamw.h"

#include <algorithm>

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

ArenaLayout moments_layout(const char* name, const ParameterLayout& layout, const std::vector<ParamRange>& ranges) {
  ArenaLayout moments(name);
  for (const ParamRange& r : ranges) {
    GPT_CHECK(r.tensor < layout.specs().size(), "AdamW range of parameter tensor {}, the model has {}", r.tensor,
              layout.specs().size());
    const ArenaBuffer& b = layout.arena_layout().buffer(r.tensor);
    GPT_CHECK(r.offset >= 0 && r.count >= 0 && static_cast<size_t>(r.offset + r.count) * dtype_size(b.dtype) <= b.bytes,
              "AdamW range [{}, {}) outside parameter '{}'", r.offset, r.offset + r.count, b.name);
    moments.add(b.name, {r.count}, b.dtype);
  }
  return moments;
}

}  // namespace

AdamW::AdamW(const OptimConfig& config, const ParameterLayout& layout, Backend& backend)
    : AdamW(config, layout, backend, whole_tensors(layout)) {}

AdamW::AdamW(const OptimConfig& config, const ParameterLayout& layout, Backend& backend, std::vector<ParamRange> ranges)
    : config_(config), layout_(layout), backend_(backend), ranges_(std::move(ranges)),
      owns_all_(ranges_ == whole_tensors(layout)), m_(moments_layout("adamw_m", layout, ranges_), backend),
      v_(moments_layout("adamw_v", layout, ranges_), backend) {
  for (const ParamRange& r : ranges_) num_elements_ += r.count;
  for (Arena* arena : {&m_, &v_})
    if (arena->layout().total_bytes() > 0)
      backend_.fill({Tensor(arena->base(), {static_cast<int64_t>(arena->layout().total_bytes() / 4)}), 0.0f});
  for (const ParamSpec& spec : layout.specs()) {
    const auto& nd = config.no_decay;
    decays_.push_back(std::find(nd.begin(), nd.end(), kind_name(spec.kind)) == nd.end());
  }
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
  backend_.adamw_update(a);
}

void AdamW::step(Arena& params, Arena& grads, double lr, double grad_scale) {
  ++step_count_;
  for (size_t i = 0; i < ranges_.size(); ++i) {
    const ParamRange& r = ranges_[i];
    Tensor p = params.tensor(r.tensor), g = grads.tensor(r.tensor);
    update(i, owns_all_ ? p : p.elements(r.offset, r.count), owns_all_ ? g : g.elements(r.offset, r.count), lr,
           grad_scale);
  }
}

void AdamW::step(Arena& params, std::span<const Tensor> grads, double lr, double grad_scale) {
  GPT_CHECK(grads.size() == ranges_.size(), "AdamW::step: {} gradient views for {} ranges", grads.size(),
            ranges_.size());
  ++step_count_;
  for (size_t i = 0; i < ranges_.size(); ++i) {
    const ParamRange& r = ranges_[i];
    GPT_CHECK(grads[i].numel() == r.count, "AdamW::step: range {} has {} elements, its gradient view {}", i, r.count,
              grads[i].numel());
    update(i, params.tensor(r.tensor).elements(r.offset, r.count), grads[i], lr, grad_scale);
  }
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
      backend_.copy_to_host(flat.data() + old, t.data, t.bytes());
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
      backend_.copy_to_device(t.data, flat.data() + offset, t.bytes());
      offset += static_cast<size_t>(t.numel());
    }
  }
  step_count_ = step_count;
}

}  // namespace gpt
