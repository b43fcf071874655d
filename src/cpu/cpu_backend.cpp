#include "cpu/cpu_backend.h"

#include <cblas.h>
#include <omp.h>

#include <cstdlib>
#include <cstring>

namespace gpt::cpu {

CpuBackend::CpuBackend(int threads, size_t narrow_matmul_workspace_bytes, bool exact_narrow_matmul)
    : matmul_workspace_(narrow_matmul_workspace_bytes),
      onednn_(!exact_narrow_matmul && onednn_info().native_bf16 ? std::make_unique<OnednnMatmul>() : nullptr) {
  // One threading runtime: the Debian OpenBLAS we link is its OpenMP build, so BLAS and our own loops
  // share libgomp's thread pool instead of two pools competing for the cores.
  if (threads > 0) {
    omp_set_num_threads(threads);
    openblas_set_num_threads(threads);
  }
  threads_ = omp_get_max_threads();
}

CpuBackend::~CpuBackend() = default;

BackendCapabilities CpuBackend::capabilities() const {
  BackendCapabilities caps;
  caps.one_row_products_of_any_formats = true;
  caps.device_memory_is_host = true;
  caps.narrow_matmul_workspace_bytes = matmul_workspace_.capacity_bytes();
  return caps;
}

void* CpuBackend::allocate(size_t bytes) {
  constexpr size_t kAlign = 64;
  void* p = std::aligned_alloc(kAlign, (bytes + kAlign - 1) / kAlign * kAlign);
  GPT_CHECK(p != nullptr, "cpu backend: could not allocate {} bytes", bytes);
  return p;
}

void CpuBackend::deallocate(void* ptr) { std::free(ptr); }

void CpuBackend::copy_to_device(void* dst, const void* host_src, size_t bytes) { std::memcpy(dst, host_src, bytes); }

void CpuBackend::copy_to_host(void* host_dst, const void* src, size_t bytes) { std::memcpy(host_dst, src, bytes); }

}  // namespace gpt::cpu
