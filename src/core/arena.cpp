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

size_t ArenaLayout::index_of(const std::string& buffer_name) const {
  for (size_t i = 0; i < buffers_.size(); ++i)
    if (buffers_[i].name == buffer_name) return i;
  GPT_FAIL("arena '{}' has no buffer named '{}'", name_, buffer_name);
}

Arena::Arena(ArenaLayout layout, Backend& backend) : layout_(std::move(layout)), backend_(backend) {
  if (layout_.total_bytes() > 0) base_ = backend_.allocate(layout_.total_bytes());
}

Arena::~Arena() {
  if (base_) backend_.deallocate(base_);
}

Tensor Arena::tensor(size_t index) {
  const ArenaBuffer& b = layout_.buffer(index);
  Tensor t;
  t.data = static_cast<char*>(base_) + b.offset;
  t.shape = b.shape;
  t.ndim = b.ndim;
  t.dtype = b.dtype;
  t.device = backend_.device();
  peak_bytes_ = std::max(peak_bytes_, b.offset + b.bytes);
  return t;
}

}  // namespace gpt
