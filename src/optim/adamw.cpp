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

std::vector<ParamRange> whole_tensors(const ParameterLayout& layout) {
  std::vector<ParamRange> ranges;
  for (size_t i = 0; i < layout.specs().size(); ++i) {
    const ArenaBuffer& b = layout.arena_layout().buffer(i);
    ranges.push_back({i, 0, static_cast<int64_t>(b.bytes / dtype_size(b.dtype))});
  }
  return ranges;
}

AdamW::AdamW(const OptimConfig& config, const ParameterLayout& layout, Backend& backend)
    : AdamW(config, layout, backend, whole_tensors(layout)) {}

AdamW::AdamW(const OptimConfig& config, const ParameterLayout& layout, Backend& backend, std::vector<ParamRange> ranges)
    : AdamW(config, layout, backend, std::move(ranges), nullptr, DType::F32, OffloadMasters::HostCopy) {}

AdamW::AdamW(const OptimConfig& config, const ParameterLayout& layout, Backend& backend, std::vector<ParamRange> ranges,
             Backend& host, DType grad_dtype, OffloadMasters masters)
    : AdamW(config, layout, backend, std::move(ranges), &host, grad_dtype, masters) {}

AdamW::AdamW(const OptimConfig& config, const ParameterLayout& layout, Backend& backend, std::vector<ParamRange> ranges,
             Backend* host, DType grad_dtype, OffloadMasters masters)
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
    masters_in_parameters_ = masters == OffloadMasters::InParameters;
    if (!masters_in_parameters_)
      host_masters_ = std::make_unique<Arena>(moments_layout("offload_masters", layout, ranges_), *host_, &backend_);
    host_grads_ =
        std::make_unique<Arena>(moments_layout("offload_gradients", layout, ranges_, grad_dtype), *host_, &backend_);
    plan_units();
  }
}

void AdamW::plan_units() {
  if (!owns_all_) {
    units_.resize(ranges_.size());
    for (size_t i = 0; i < ranges_.size(); ++i) units_[i].pieces.push_back({i, 0, ranges_[i].count});
    return;
  }
  for (size_t i = 0; i < ranges_.size(); ++i)
    if (!outside_blocks(layout_.specs()[ranges_[i].tensor].name))
      blocks_ = static_cast<int>(layout_.arena_layout().buffer(ranges_[i].tensor).shape[0]);
  units_.resize(static_cast<size_t>(blocks_) + 1);
  for (size_t i = 0; i < ranges_.size(); ++i) {
    const int64_t n = ranges_[i].count;
    if (outside_blocks(layout_.specs()[ranges_[i].tensor].name)) {
      units_.back().pieces.push_back({i, 0, n});
      continue;
    }
    const ArenaBuffer& b = layout_.arena_layout().buffer(ranges_[i].tensor);
    GPT_CHECK(b.shape[0] == blocks_, "offloaded AdamW: parameter '{}' has {} slices, the model {} blocks", b.name,
              b.shape[0], blocks_);
    const int64_t per_block = n / blocks_;
    for (int l = 0; l < blocks_; ++l) units_[unit_of_block(l)].pieces.push_back({i, l * per_block, per_block});
  }
}

// Backward finishes block L-1 first and the embeddings last: the units run in that order.
size_t AdamW::unit_of_block(int block) const {
  GPT_CHECK(block >= -1 && block < blocks_, "AdamW::stage_gradients: block {} outside [-1, {})", block, blocks_);
  return block < 0 ? static_cast<size_t>(blocks_) : static_cast<size_t>(blocks_ - 1 - block);
}

Tensor AdamW::range_view(Arena& arena, size_t i) {
  const ParamRange& r = ranges_[i];
  Tensor t = arena.tensor(r.tensor);
  return owns_all_ ? t : t.elements(r.offset, r.count);
}

void AdamW::write_compute_copy(std::vector<ComputeCopySlice> slices) {
  GPT_CHECK(owns_all_ && (host_ == nullptr || masters_in_parameters_),
            "AdamW::write_compute_copy: the update writes the compute copy only when it owns every parameter (not a "
            "ZeRO-1 shard), on the device or offloaded with the masters in the parameter arena");
  GPT_CHECK(!ranges_.empty() && !slices.empty(), "AdamW::write_compute_copy: no parameters or no slices");
  size_t tensor = 0;  // the slices' tensor so far, and its next element
  int64_t next = 0;
  for (const ComputeCopySlice& s : slices) {
    if (s.tensor == tensor + 1 && next == ranges_[tensor].count) tensor = s.tensor, next = 0;
    GPT_CHECK(s.tensor == tensor && s.offset == next && s.copy.numel() > 0 && next + s.copy.numel() <= ranges_[tensor].count,
              "AdamW::write_compute_copy: a slice of tensor {} at [{}, {}) where tensor {}'s elements from {} come next",
              s.tensor, s.offset, s.offset + s.copy.numel(), tensor, next);
    next += s.copy.numel();
  }
  GPT_CHECK(tensor + 1 == ranges_.size() && next == ranges_.back().count,
            "AdamW::write_compute_copy: the slices end at tensor {}'s element {}, not at the end of the last tensor",
            tensor, next);
  // Offloaded, each unit's piece of a tensor is one slice: the update writes it as it updates the piece.
  for (Unit& unit : units_) {
    for (Piece& p : unit.pieces) {
      const auto slice = std::find_if(slices.begin(), slices.end(), [&](const ComputeCopySlice& c) {
        return c.tensor == ranges_[p.range].tensor && c.offset == p.offset;
      });
      GPT_CHECK(slice != slices.end() && slice->copy.numel() == p.count,
                "AdamW::write_compute_copy: no slice is elements [{}, {}) of tensor {}, an offloaded unit's piece",
                p.offset, p.offset + p.count, ranges_[p.range].tensor);
      p.compute_slice = slice - slices.begin();
    }
  }
  compute_slices_ = std::move(slices);
}

void AdamW::update(size_t i, int64_t offset, const Tensor& params, const Tensor& grads, double lr, double grad_scale,
                   const Tensor& compute) {
  if (params.numel() == 0) return;
  AdamWArgs a;
  a.params = params;
  a.grads = grads;
  a.m = m_.tensor(i).elements(offset, params.numel());
  a.v = v_.tensor(i).elements(offset, params.numel());
  a.lr = static_cast<float>(lr);
  a.beta1 = static_cast<float>(config_.beta1);
  a.beta2 = static_cast<float>(config_.beta2);
  a.eps = static_cast<float>(config_.eps);
  a.weight_decay = decays_[ranges_[i].tensor] ? static_cast<float>(config_.weight_decay) : 0.0f;
  a.grad_scale = static_cast<float>(grad_scale);
  a.step = step_count_;
  a.compute = compute;
  state_backend().adamw_update(a);
}

template <class Grads>
uint64_t AdamW::queue_gradients(size_t u, const Grads& range_grads) {
  uint64_t ticket = 0;
  for (const Piece& p : units_[u].pieces) {
    const Tensor device = range_grads(p.range), host = host_grads_->tensor(p.range);
    GPT_CHECK(device.dtype == host.dtype && device.numel() == host.numel(),
              "offloaded AdamW: range {} has {} {} gradients, its host copy holds {} {}", p.range, device.numel(),
              dtype_name(device.dtype), host.numel(), dtype_name(host.dtype));
    const Tensor from = device.elements(p.offset, p.count);
    if (p.count > 0) ticket = backend_.transfer_to_host(host.elements(p.offset, p.count).data, from.data, from.bytes());
  }
  return ticket;
}

void AdamW::stage_gradients(int block, Arena& grads) {
  if (host_ == nullptr) return;
  GPT_CHECK(owns_all_, "AdamW::stage_gradients: this optimizer owns a shard; its gradients are final only after "
            "the reduce-scatter, which the update copies");
  Unit& unit = units_[unit_of_block(block)];
  GPT_CHECK(!unit.staged, "AdamW::stage_gradients: block {}'s gradients were staged twice in one step", block);
  unit.landed = queue_gradients(unit_of_block(block), [&](size_t i) { return range_view(grads, i); });
  unit.staged = true;
}

void AdamW::forget_staged_gradients() {
  for (Unit& unit : units_) {
    // A copy still in flight would land in the host buffer the next step's copies write.
    if (unit.staged) backend_.wait_transfer(unit.landed);
    unit.staged = false;
  }
}

template <class Grads>
void AdamW::host_update_all(Arena& params, const Grads& grads_of, double lr, double grad_scale) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  // Range i's masters as AdamW updates them: its own host copy, or the host-resident parameter arena.
  auto masters = [&](size_t i) { return masters_in_parameters_ ? range_view(params, i) : host_masters_->tensor(i); };
  if (!masters_in_parameters_ && !masters_loaded_) {
    for (size_t i = 0; i < ranges_.size(); ++i) {
      const Tensor device = range_view(params, i);
      backend_.copy_to_host(host_masters_->tensor(i).data, device.data, device.bytes());
    }
    masters_loaded_ = true;
  }
  // What backward's hook did not stage is queued now, every unit before the first AdamW, so that each
  // lands while the units before it update.
  for (size_t u = 0; u < units_.size(); ++u)
    if (!units_[u].staged) units_[u].landed = queue_gradients(u, grads_of);
  double adamw_seconds = 0.0;
  for (size_t u = 0; u < units_.size(); ++u) {
    Unit& unit = units_[u];
    backend_.wait_transfer(unit.landed);
    const auto adamw_start = Clock::now();
    for (const Piece& p : unit.pieces)
      update(p.range, p.offset, masters(p.range).elements(p.offset, p.count),
             host_grads_->tensor(p.range).elements(p.offset, p.count), lr, grad_scale,
             p.compute_slice >= 0 ? compute_slices_[static_cast<size_t>(p.compute_slice)].copy : Tensor{});
    adamw_seconds += std::chrono::duration<double>(Clock::now() - adamw_start).count();
    for (const Piece& p : unit.pieces) {
      if (p.count == 0 || masters_in_parameters_) continue;
      const Tensor device = range_view(params, p.range).elements(p.offset, p.count);
      backend_.transfer_to_device(device.data, host_masters_->tensor(p.range).elements(p.offset, p.count).data,
                                  device.bytes());
    }
    unit.staged = false;
    // Units run in unit_of_block's order: block L-1 first, the tensors outside the blocks last. A shard's
    // units are ranges, not blocks: its owner gathers the weights and the next forward casts them all.
    if (masters_in_parameters_ && owns_all_ && masters_updated_)
      masters_updated_(u < static_cast<size_t>(blocks_) ? blocks_ - 1 - static_cast<int>(u) : -1);
  }
  // The next forward, and the data-parallel gather of a shard, read the weights just sent.
  backend_.order_after_transfers();
  last_adamw_ms_ = 1e3 * adamw_seconds;
  last_host_ms_ = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

template <class Grads>
void AdamW::update_all(Arena& params, const Grads& grads_of, double lr, double grad_scale) {
  ++step_count_;
  if (host_ == nullptr) {
    for (const ComputeCopySlice& s : compute_slices_) {
      const int64_t n = s.copy.numel();
      update(s.tensor, s.offset, range_view(params, s.tensor).elements(s.offset, n),
             grads_of(s.tensor).elements(s.offset, n), lr, grad_scale, s.copy);
    }
    if (compute_slices_.empty())
      for (size_t i = 0; i < ranges_.size(); ++i) update(i, 0, range_view(params, i), grads_of(i), lr, grad_scale);
    return;
  }
  host_update_all(params, grads_of, lr, grad_scale);
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
