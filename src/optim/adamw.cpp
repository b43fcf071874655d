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

}  // namespace

AdamW::AdamW(const OptimConfig& config, const ParameterLayout& layout, Backend& backend)
    : config_(config), layout_(layout), backend_(backend), m_(layout.arena_layout(), backend),
      v_(layout.arena_layout(), backend) {
  for (Arena* arena : {&m_, &v_})
    backend_.fill({Tensor(arena->base(), {static_cast<int64_t>(arena->layout().total_bytes() / 4)}), 0.0f});
  for (const ParamSpec& spec : layout.specs()) {
    const auto& nd = config.no_decay;
    decays_.push_back(std::find(nd.begin(), nd.end(), kind_name(spec.kind)) == nd.end());
  }
}

void AdamW::step(Arena& params, Arena& grads, double lr, double grad_scale) {
  ++step_count_;
  for (size_t i = 0; i < layout_.specs().size(); ++i) {
    AdamWArgs a;
    a.params = params.tensor(i);
    a.grads = grads.tensor(i);
    a.m = m_.tensor(i);
    a.v = v_.tensor(i);
    a.lr = static_cast<float>(lr);
    a.beta1 = static_cast<float>(config_.beta1);
    a.beta2 = static_cast<float>(config_.beta2);
    a.eps = static_cast<float>(config_.eps);
    a.weight_decay = decays_[i] ? static_cast<float>(config_.weight_decay) : 0.0f;
    a.grad_scale = static_cast<float>(grad_scale);
    a.step = step_count_;
    backend_.adamw_update(a);
  }
}

std::vector<float> AdamW::state_to_host() {
  std::vector<float> flat;
  flat.reserve(2 * static_cast<size_t>(layout_.num_parameters()));
  for (Arena* arena : {&m_, &v_}) {
    for (size_t i = 0; i < layout_.specs().size(); ++i) {
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
  GPT_CHECK(flat.size() == 2 * static_cast<size_t>(layout_.num_parameters()),
            "optimizer state has {} values, expected {}", flat.size(), 2 * layout_.num_parameters());
  size_t offset = 0;
  for (Arena* arena : {&m_, &v_}) {
    for (size_t i = 0; i < layout_.specs().size(); ++i) {
      Tensor t = arena->tensor(i);
      backend_.copy_to_device(t.data, flat.data() + offset, t.bytes());
      offset += static_cast<size_t>(t.numel());
    }
  }
  step_count_ = step_count;
}

}  // namespace gpt
