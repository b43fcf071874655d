// Dropout masks on the CPU. Element i (flat index over the whole tensor) is kept iff
// stream.word(i) >= dropout_threshold(p); kept values are scaled by 1/(1-p). The mask is a pure function
// of the stream, so backward regenerates exactly the mask forward used, and the CUDA kernels, which
// use the same rule, draw the same one.
// One Philox call yields the words of four consecutive elements (a block). DropoutMask::keep(i) is for
// random access and computes i's whole block; loops that walk elements in order use a DropoutCursor,
// which keeps the last block and so computes each block once instead of four times.
#pragma once

#include "backend/op_args.h"
#include "core/error.h"

#include <cstdint>

namespace gpt::cpu {

struct DropoutMask {
  explicit DropoutMask(const DropoutSpec& spec)
      : stream_(spec.stream), threshold_(dropout_threshold(spec.p)), active_(spec.active()),
        scale_(spec.active() ? 1.0 / (1.0 - static_cast<double>(spec.p)) : 1.0) {
    GPT_CHECK(spec.p >= 0.0f && spec.p < 1.0f, "dropout probability must be in [0, 1), got {}", spec.p);
  }

  bool active() const { return active_; }
  // Always true when inactive, so callers may skip the check or not.
  bool keep(uint64_t i) const { return !active_ || stream_.word(i) >= threshold_; }
  double scale() const { return scale_; }
  const RngStream& stream() const { return stream_; }
  uint32_t threshold() const { return threshold_; }

 private:
  RngStream stream_;
  uint32_t threshold_;
  bool active_;
  double scale_;
};

// keep(i) with the same answer as DropoutMask::keep(i), caching the Philox block of the last element asked
// for. Any order is correct; increasing order is what makes it fast. One cursor per thread.
class DropoutCursor {
 public:
  explicit DropoutCursor(const DropoutMask& mask) : mask_(mask) {}

  bool keep(uint64_t i) {
    if (!mask_.active()) return true;
    const uint64_t block = i >> 2;
    if (block != block_) {
      words_ = mask_.stream().block(block);
      block_ = block;
    }
    return words_.v[i & 3] >= mask_.threshold();
  }

 private:
  const DropoutMask& mask_;
  uint64_t block_ = ~uint64_t{0};
  Philox4 words_{};
};

}  // namespace gpt::cpu
