#include "bench/memory_bandwidth.h"

#include "bench/best_time.h"
#include "core/error.h"

#include <omp.h>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <memory>
#include <new>

namespace gpt::bench {
namespace {

struct AlignedFree {
  void operator()(float* p) const { ::operator delete[](p, std::align_val_t{64}); }
};
using HostBuffer = std::unique_ptr<float[], AlignedFree>;

// f(first, count) on each of `threads` OpenMP threads for its slice of n floats, in whole cache lines (16
// floats): the same slice in every call, so each thread first touches the pages it streams later (on a
// multi-socket host, its own node's).
template <class F>
void on_each_slice(size_t n, int threads, F&& f) {
#pragma omp parallel num_threads(threads)
  {
    const size_t lines = n / 16, t = static_cast<size_t>(omp_get_thread_num()), ts = static_cast<size_t>(threads);
    const size_t per = lines / ts, extra = lines % ts;
    const size_t first = 16 * (t * per + std::min(t, extra));
    f(first, t == ts - 1 ? n - first : 16 * (per + (t < extra ? 1 : 0)));
  }
}

}  // namespace

MemoryBandwidth measure_host_bandwidth(size_t buffer_bytes, int reps) {
  GPT_CHECK(reps >= 1 && buffer_bytes >= 4, "bandwidth: reps {} and buffer bytes {} must be positive", reps, buffer_bytes);
  const size_t n = buffer_bytes / 4;
  std::array<HostBuffer, 4> buffers;
  for (HostBuffer& b : buffers) b.reset(new (std::align_val_t{64}) float[n]);
  float *p = buffers[0].get(), *g = buffers[1].get(), *m = buffers[2].get(), *v = buffers[3].get();
  const int threads = omp_get_max_threads();
  on_each_slice(n, threads, [&](size_t first, size_t count) {
    std::fill_n(p + first, count, 0.5f);
    std::fill_n(g + first, count, 0.25f);
    std::fill_n(m + first, count, 0.0f);
    std::fill_n(v + first, count, 0.0f);
  });
  const double copy = best_seconds_of(reps, [&] {
    on_each_slice(n, threads, [&](size_t first, size_t count) { std::memcpy(m + first, p + first, count * sizeof(float)); });
  });
  // AdamW's arithmetic, so the loop streams as the optimizer does rather than as a compiler's memcpy.
  const double update = best_seconds_of(reps, [&] {
    on_each_slice(n, threads, [&](size_t first, size_t count) {
#pragma omp simd
      for (size_t i = first; i < first + count; ++i) {
        m[i] = 0.9f * m[i] + 0.1f * g[i];
        v[i] = 0.999f * v[i] + 0.001f * g[i] * g[i];
        p[i] -= 1e-3f * m[i] / (v[i] + 1e-8f);
      }
    });
  });
  const size_t copy_traffic = 2 * n * sizeof(float), update_traffic = 7 * n * sizeof(float);
  const bool copy_wins = static_cast<double>(copy_traffic) / copy >= static_cast<double>(update_traffic) / update;
  MemoryBandwidth out;
  out.buffer_bytes = n * sizeof(float);
  out.traffic_bytes = copy_wins ? copy_traffic : update_traffic;
  out.best_seconds = copy_wins ? copy : update;
  out.method = fmt::format("{} on {} OpenMP threads over host buffers; the {} reached {:.1f} GB/s",
                           copy_wins ? "a copy (std::memcpy)" : "AdamW's four-array update", threads,
                           copy_wins ? "update" : "copy",
                           copy_wins ? static_cast<double>(update_traffic) / update / 1e9
                                     : static_cast<double>(copy_traffic) / copy / 1e9);
  return out;
}

MemoryBandwidth measure_device_copy_bandwidth(Backend& backend, void* scratch, size_t scratch_bytes, size_t max_bytes,
                                              int reps) {
  GPT_CHECK(reps >= 1, "bandwidth: reps must be >= 1, got {}", reps);
  // Whole F32 words, each half 256-byte aligned as an arena's buffers are.
  const size_t half = std::min(scratch_bytes / 2, max_bytes) / 256 * 256;
  GPT_CHECK(scratch != nullptr && half > 0, "bandwidth: {} bytes of scratch is too little to copy within", scratch_bytes);
  const auto words = static_cast<int64_t>(half / 4);
  char* base = static_cast<char*>(scratch);
  const Tensor src(base, {words}, DType::F32, backend.device()), dst(base + half, {words}, DType::F32, backend.device());
  backend.fill({src, 1.0f});
  backend.synchronize();
  const double best = best_seconds_of(reps, [&] {
    backend.copy({dst, src});
    backend.synchronize();
  });
  MemoryBandwidth out;
  out.method = fmt::format("{}'s copy op, device to device", backend.name());
  out.traffic_bytes = 2 * half;
  out.buffer_bytes = half;
  out.best_seconds = best;
  return out;
}

}  // namespace gpt::bench
