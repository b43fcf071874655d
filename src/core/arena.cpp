#include "core/arena.h"

#include "backend/backend.h"

#include <algorithm>

namespace gpt {

size_t ArenaLayout::add(const std::string& buffer_name, std::span<const int64_t> shape, DType dtype) {
  ArenaBuffer b;
  b.name = buffer_name;
  b.dtype = dtype;
  int64_t numel = 1;
  for (int64_t d : shape) {
    GPT_CHECK(d >= 0, "arena '{}': buffer '{}' has a negative dimension", name_, buffer_name);
    GPT_CHECK(b.ndim < Tensor::kMaxDims, "arena '{}': buffer '{}' has too many dimensions", name_, buffer_name);
    b.shape[b.ndim++] = d;
    numel *= d;
  }
  b.bytes = static_cast<size_t>(numel) * dtype_size(dtype);
  b.offset = (total_bytes_ + kAlignment - 1) / kAlignment * kAlignment;
  // The total is kept aligned, so it is exactly the sum of the buffers' aligned sizes.
  total_bytes_ = (b.offset + b.bytes + kAlignment - 1) / kAlignment * kAlignment;
  buffers_.push_back(std::move(b));
  return buffers_.size() - 1;
}

Tensor ArenaLayout::view(size_t index, void* base, Device device) const {
  const ArenaBuffer& b = buffer(index);
  Tensor t;
  t.data = static_cast<char*>(base) + b.offset;
  t.shape = b.shape;
  t.ndim = b.ndim;
  t.dtype = b.dtype;
  t.device = device;
  return t;
}

size_t ArenaLayout::index_of(const std::string& buffer_name) const {
  for (size_t i = 0; i < buffers_.size(); ++i)
    if (buffers_[i].name == buffer_name) return i;
  GPT_FAIL("arena '{}' has no buffer named '{}'", name_, buffer_name);
}

Arena::Arena(ArenaLayout layout, Backend& backend, Backend* pin_through)
    : layout_(std::move(layout)), backend_(backend), pin_through_(pin_through) {
  const size_t bytes = layout_.total_bytes();
  if (bytes == 0) return;
  if (pin_through_ && pin_through_->capabilities().pinned_host_memory) base_ = pin_through_->allocate_pinned(bytes);
  pinned_ = base_ != nullptr;
  if (pinned_) return;
  try {
    base_ = backend_.allocate(bytes);
  } catch (const Error& e) {
    // Host memory for a device's transfers is what memory.offload keeps off the device: the remedies are
    // offload's, not the activation plan's.
    if (pin_through_)
      GPT_FAIL("memory.offload: optimizer: the host could not provide the {:.1f} MiB of '{}' ({}); free host "
               "memory, shard the optimizer over more ranks (dist.zero: 1) or set memory.offload: none",
               static_cast<double>(bytes) / (1 << 20), layout_.name(), e.what());
    // Say which planned block did not fit, and what the user can change, not only the allocator's words.
    const ArenaBuffer* largest = nullptr;
    for (const ArenaBuffer& b : layout_.buffers())
      if (!largest || b.bytes > largest->bytes) largest = &b;
    GPT_FAIL("the memory plan's arena '{}' ({:.1f} MiB in {} buffers, the largest '{}' {:.1f} MiB) could not be "
             "allocated on the {} backend: {}. Lower train.batch_size (with train.grad_accum_steps to keep the batch), "
             "set memory.budget to let the planner choose, or recompute activations (recompute.mode); "
             "`gpt-train plan CONFIG` shows what each choice takes",
             layout_.name(), static_cast<double>(bytes) / (1 << 20), layout_.buffers().size(),
             largest ? largest->name : "", largest ? static_cast<double>(largest->bytes) / (1 << 20) : 0.0,
             backend_.name(), e.what());
  }
}

Arena::~Arena() {
  if (base_ == nullptr) return;
  if (pinned_) pin_through_->deallocate_pinned(base_);
  else backend_.deallocate(base_);
}

Tensor Arena::tensor(size_t index) {
  const ArenaBuffer& b = layout_.buffer(index);
  peak_bytes_ = std::max(peak_bytes_, b.offset + b.bytes);
  return layout_.view(index, base_, backend_.device());
}

}  // namespace gpt
