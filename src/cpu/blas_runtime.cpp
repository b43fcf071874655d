#include "cpu/blas_runtime.h"

#include <cblas.h>
#include <strings.h>

#include <cstdlib>

namespace gpt::cpu {
namespace {

bool cpu_has_avx512() {
#if defined(__x86_64__) && defined(__GNUC__)
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
#else
  return false;
#endif
}

}  // namespace

BlasInfo blas_info() {
  BlasInfo info;
  info.config = openblas_get_config();
  info.core = openblas_get_corename();
  if (const char* env = std::getenv("OPENBLAS_CORETYPE")) info.coretype = env;
  info.parallel = openblas_get_parallel();
  info.threads = openblas_get_num_threads();
  const bool avx2_kernels = strcasecmp(info.core.c_str(), "haswell") == 0 || strcasecmp(info.core.c_str(), "zen") == 0;
  if (avx2_kernels && cpu_has_avx512()) {
    info.note = info.coretype.empty()
                    ? "AVX2 kernels on a CPU with AVX-512: OPENBLAS_CORETYPE=SkylakeX selects OpenBLAS's AVX-512 ones"
                    : "OPENBLAS_CORETYPE=" + info.coretype +
                          " forces AVX2 kernels on a CPU with AVX-512; unset it to let OpenBLAS choose its AVX-512 ones";
  } else if (!info.coretype.empty()) {
    info.note = "chosen by OPENBLAS_CORETYPE=" + info.coretype;
  }
  return info;
}

std::string blas_parallel_name(int parallel) {
  switch (parallel) {
    case 0: return "sequential";
    case 1: return "pthreads";
    case 2: return "OpenMP";
  }
  return "unknown (" + std::to_string(parallel) + ")";
}

}  // namespace gpt::cpu
