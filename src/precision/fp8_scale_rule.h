// The scale rule of FP8 scaling (precision/fp8_scaling.h explains the recipes), header-only and C++17 so
// that a CUDA kernel computes the scale where the amax is (fp8_current_scale) with the host's exact rule:
//   scale = (fp8_max / amax) / 2^margin   in FP32 (an IEEE division, then an exact power-of-two scaling),
// previous_scale when amax is 0, negative or not finite, FLT_MAX when the quotient overflows (TE's
// _default_sf_compute).
#pragma once

#include "core/philox.h"  // GPT_HOST_DEVICE

#include <cfloat>
#include <cmath>

namespace gpt {

GPT_HOST_DEVICE float fp8_scale_from_amax(float amax, float fp8_max, int margin, float previous_scale) {
  // amax > 0 is false for NaN; amax > FLT_MAX is +inf.
  if (!(amax > 0.0f) || amax > FLT_MAX) return previous_scale;
#if defined(__CUDA_ARCH__)
  const float scale = ldexpf(fp8_max / amax, -margin);
#else
  const float scale = std::ldexp(fp8_max / amax, -margin);
#endif
  return scale > FLT_MAX ? FLT_MAX : scale;
}

}  // namespace gpt
