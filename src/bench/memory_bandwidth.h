// The memory bandwidth that each op's traffic (backend/op_traffic.h) is set against, measured on the spot
// as the matrix-product peak is (gemm_peak.h): the best of `reps` timed runs of a streaming kernel over
// buffers larger than any cache, after one untimed run, its traffic counted as op_traffic_bytes counts an
// op's (each byte read once, each written once). An op whose traffic runs at this rate moves its bytes as
// fast as that kernel does.
#pragma once

#include "backend/backend.h"

#include <cstddef>
#include <string>

namespace gpt::bench {

struct MemoryBandwidth {
  std::string method;         // what ran, for the report
  size_t traffic_bytes = 0;   // of one run
  size_t buffer_bytes = 0;    // of each buffer it streamed through
  double best_seconds = 0.0;
  double gbs() const { return best_seconds > 0.0 ? static_cast<double>(traffic_bytes) / best_seconds / 1e9 : 0.0; }
};

// Host memory (the CPU backend's device memory), on the current OpenMP team size, each thread streaming its
// own slice of four buffers of buffer_bytes (first touched by the thread that streams it): the better of a
// copy (std::memcpy of one buffer into another) and AdamW's update (four arrays read, three written: the
// CPU's widest stream). A core sustains more misses over several streams than over one, so on a CPU one
// copy understates what the threaded ops reach (2-core Zen 5, in gpt-train bench: 34-42 GB/s copying,
// 51-60 updating).
MemoryBandwidth measure_host_bandwidth(size_t buffer_bytes, int reps);

// A device: the backend's copy op (on CUDA cudaMemcpyAsync device to device, which streams at close to the
// memory's rate) from the first half of `scratch` into the second, between synchronize() calls. scratch is
// memory the run already holds and has not yet written (the activation arena before the first step), so
// the measurement allocates nothing on a device the plan may have filled; each half is at most max_bytes.
MemoryBandwidth measure_device_copy_bandwidth(Backend& backend, void* scratch, size_t scratch_bytes, size_t max_bytes,
                                              int reps);

}  // namespace gpt::bench
