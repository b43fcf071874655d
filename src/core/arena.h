// Arenas: the run's memory is a few large blocks whose layout (a list of named buffers with sizes and
// offsets) is computed from the config before anything is allocated. Nothing is allocated inside a
// training step; ops get Tensor views into these blocks.
#pragma once

#include "core/tensor.h"

#include <cstddef>
#include <span>
#include <string>
#include <vector>

namespace gpt {

class Backend;

struct ArenaBuffer {
  std::string name;
  size_t offset = 0;
  size_t bytes = 0;
  std::array<int64_t, Tensor::kMaxDims> shape{};
  int ndim = 0;
  DType dtype = DType::F32;
};

class ArenaLayout {
 public:
  static constexpr size_t kAlignment = 256;  // a cache line and the CUDA allocation granularity of interest

  explicit ArenaLayout(std::string name) : name_(std::move(name)) {}

  // Appends a buffer and returns its index.
  size_t add(const std::string& buffer_name, std::initializer_list<int64_t> shape, DType dtype = DType::F32) {
    return add(buffer_name, std::span<const int64_t>(shape.begin(), shape.size()), dtype);
  }
  size_t add(const std::string& buffer_name, std::span<const int64_t> shape, DType dtype);

  const std::string& name() const { return name_; }
  const std::vector<ArenaBuffer>& buffers() const { return buffers_; }
  const ArenaBuffer& buffer(size_t index) const { return buffers_.at(index); }
  size_t index_of(const std::string& buffer_name) const;
  size_t total_bytes() const { return total_bytes_; }
  // The view of buffer `index` in a block at `base` laid out by this layout: what every arena hands out,
  // whichever allocator gave its block.
  Tensor view(size_t index, void* base, Device device) const;
  static size_t aligned(size_t bytes) { return (bytes + kAlignment - 1) / kAlignment * kAlignment; }

 private:
  std::string name_;
  std::vector<ArenaBuffer> buffers_;
  size_t total_bytes_ = 0;
};

class Arena {
 public:
  // The block is `backend`'s memory, and its views are on `backend`'s device. With `pin_through` (a device
  // backend that copies to and from this host memory: the offloaded optimizer's state, the masters kept on
  // the host), it is that backend's pinned memory where it gives some, since a GPU's copy engine reads and
  // writes only page-locked memory while the device computes (a copy from ordinary memory is staged by the
  // driver and holds the host until it is done); else, or where pinning is refused (a host at its
  // page-locked limit), `backend`'s ordinary memory. pinned() says which; the caller says so to the user.
  Arena(ArenaLayout layout, Backend& backend, Backend* pin_through = nullptr);
  ~Arena();
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  Tensor tensor(size_t index);
  Tensor tensor(const std::string& buffer_name) { return tensor(layout_.index_of(buffer_name)); }
  const ArenaLayout& layout() const { return layout_; }
  void* base() const { return base_; }
  // Whether the block is pin_through's pinned memory.
  bool pinned() const { return pinned_; }
  // Highest byte of the arena that any view handed out so far reaches: the measured peak.
  size_t peak_bytes() const { return peak_bytes_; }

 private:
  ArenaLayout layout_;
  Backend& backend_;
  Backend* pin_through_ = nullptr;
  void* base_ = nullptr;
  bool pinned_ = false;
  size_t peak_bytes_ = 0;
};

}  // namespace gpt
