// Device side of InputErrors (device_context.h): a kernel that finds a token id or target outside its
// range records where, and goes on (the row gets NaN); the backend reports the first one after the step.
#pragma once

#include "common/cuda_api.h"
#include "common/device_context.h"

#include <cstdint>

namespace gpt::cuda {

__device__ __forceinline__ void record_bad_input(unsigned long long* first, unsigned long long* bound, int64_t position,
                                                 int32_t value, int64_t limit) {
  atomicMin(first, (static_cast<unsigned long long>(position) << 32) | static_cast<uint32_t>(value));
  atomicMax(bound, static_cast<unsigned long long>(limit));
}

}  // namespace gpt::cuda
