// Dropout masks in the kernels, by the CPU's rule (src/cpu/dropout.h, core/philox.h): element i (flat
// index over the whole tensor) is kept iff stream.word(i) >= dropout_threshold(p), and kept values are
// scaled by 1/(1-p), which the CPU applies in double: a kernel that wants the CPU's bits multiplies by
// the double scale and rounds once, as it does (a few double operations an element of a memory-bound
// kernel, which even the 1/64-rate FP64 of consumer GPUs keeps up with). One Philox call gives the words of four consecutive elements, so a chunk of
// consecutive elements computes each Philox block it touches once. The mask is a pure function of the
// stream and the element, so it is bit for bit the CPU's whatever the kernel's layout.
#pragma once

#include "backend/op_args.h"
#include "common/cuda_api.h"
#include "core/philox.h"

#include <cstdint>

namespace gpt::cuda {

struct DropoutRule {
  RngStream stream;
  uint32_t threshold = 0;
  double scale = 1.0;  // 1/(1-p)
  bool active = false;
};

// Host side.
inline DropoutRule dropout_rule(const DropoutSpec& spec) {
  GPT_CHECK(spec.p >= 0.0f && spec.p < 1.0f, "dropout probability must be in [0, 1), got {}", spec.p);
  DropoutRule r;
  r.stream = spec.stream;
  r.active = spec.active();
  r.threshold = dropout_threshold(spec.p);
  r.scale = r.active ? 1.0 / (1.0 - static_cast<double>(spec.p)) : 1.0;
  return r;
}

// keep[k]: whether element first + k is kept, for k < N (all true when dropout is off).
template <int N>
__device__ __forceinline__ void dropout_keep(const DropoutRule& rule, uint64_t first, bool (&keep)[N]) {
  if (!rule.active) {
    for (int k = 0; k < N; ++k) keep[k] = true;
    return;
  }
  uint64_t block = first >> 2;
  Philox4 words = rule.stream.block(static_cast<uint32_t>(block));
  for (int k = 0; k < N; ++k) {
    const uint64_t i = first + k;
    if ((i >> 2) != block) {
      block = i >> 2;
      words = rule.stream.block(static_cast<uint32_t>(block));
    }
    keep[k] = words.v[i & 3] >= rule.threshold;
  }
}

}  // namespace gpt::cuda
