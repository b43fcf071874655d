// The BLAS under the CPU backend: which build and kernels it runs and how it threads, for `gpt-train
// bench` and `info`.
//
// OpenBLAS built with DYNAMIC_ARCH (Debian's) picks its kernels when it is loaded, from the CPU, unless
// the environment variable OPENBLAS_CORETYPE names them. Forcing AVX2 kernels (Haswell, Zen) on a CPU
// with AVX-512 costs a factor of 2-3 in FP32 GEMM on Zen 4/5, so the note says so when it happens.
#pragma once

#include <string>

namespace gpt::cpu {

struct BlasInfo {
  std::string config;    // openblas_get_config(): version and build options
  std::string core;      // kernels in use (openblas_get_corename())
  std::string coretype;  // OPENBLAS_CORETYPE from the environment, empty when unset
  std::string note;      // a remark on the choice of kernels, or empty
  int parallel = 0;      // openblas_get_parallel(): 0 sequential, 1 pthreads, 2 OpenMP
  int threads = 0;       // openblas_get_num_threads()
};

BlasInfo blas_info();
// "sequential", "pthreads" or "OpenMP" for openblas_get_parallel()'s value.
std::string blas_parallel_name(int parallel);

}  // namespace gpt::cpu
