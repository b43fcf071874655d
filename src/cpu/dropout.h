// Dropout masks on the CPU. Element i (flat index over the whole tensor) is kept iff
// stream.word(i) >= dropout_threshold(p); kept values are scaled by 1/(1-p). The mask is a pure function
// of the stream, so backward regenerates exactly the mask forward used, and the CUDA kernels, which
// use the same rule, draw the same one.
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

 private:
  RngStream stream_;
  uint32_t threshold_;
  bool active_;
  double scale_;
};

}  // namespace gpt::cpu
