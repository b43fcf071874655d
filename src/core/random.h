// Host-side random numbers for initialisation and sampling, from Philox so the values are the same
// on every platform and standard library (std::normal_distribution is not specified bit for bit).
#pragma once

#include "core/philox.h"

#include <cmath>
#include <cstdint>

namespace gpt {

class HostRng {
 public:
  HostRng(uint64_t seed, uint32_t stream) : seed_(seed), stream_(stream) {}

  uint32_t next_u32() {
    if (lane_ == 4) {
      block_ = philox4x32_10(Philox4{{counter_lo_, counter_hi_, stream_, 0x5eed}}, static_cast<uint32_t>(seed_),
                             static_cast<uint32_t>(seed_ >> 32));
      if (++counter_lo_ == 0) ++counter_hi_;
      lane_ = 0;
    }
    return block_.v[lane_++];
  }
  // Uniform in (0, 1): never exactly 0, so log() is safe.
  double uniform() { return (static_cast<double>(next_u32()) + 0.5) / 4294967296.0; }
  // Standard normal by Box-Muller.
  double normal() {
    const double u1 = uniform(), u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }

 private:
  uint64_t seed_;
  uint32_t stream_;
  uint32_t counter_lo_ = 0, counter_hi_ = 0;
  Philox4 block_{};
  int lane_ = 4;
};

}  // namespace gpt
