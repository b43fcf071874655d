// gpt_tests' and gpt_cuda_emu_tests' main: the process settings ctest cannot give them, then Google Test.
//
// gtest_discover_tests passes a list-valued ENVIRONMENT on as separate words, which set_tests_properties reads
// as property-value pairs, so only the first variable of such a list ever reached the tests. What the tests
// need beyond OMP_NUM_THREADS is therefore set here, where no CMake quoting stands in between. Both settings
// are read when a process starts (libgomp's when it loads, LeakSanitizer's before main), so main sets them and
// executes itself again once; the gpt-train processes the tests start inherit them. OpenBLAS picks its kernels
// by CPU when it loads, so the same sgemm rounds differently on an AVX2 machine and an AVX-512 one; tests that
// compare bits recorded on one machine (PrecisionBaseline) need the same kernels on every machine.
#include <gtest/gtest.h>

#include <cstdlib>

#include <unistd.h>

#include "cli/openmp_env.h"

int main(int argc, char** argv) {
  bool set_any = false;
  // Sanitizer builds: leaks of the libraries in tests/lsan.supp are theirs, kept until exit by design.
  if (std::getenv("LSAN_OPTIONS") == nullptr) {
    ::setenv("LSAN_OPTIONS", "suppressions=" GPT_SOURCE_DIR "/tests/lsan.supp", 1);
    set_any = true;
  }
  // The tests train in process: bound libgomp's spinning as gpt-train does for itself (default spinning makes
  // the shared cores of a CI machine many times slower).
  if (std::getenv("OMP_WAIT_POLICY") == nullptr && std::getenv("GOMP_SPINCOUNT") == nullptr) {
    ::setenv("GOMP_SPINCOUNT", gpt::kSpinCount, 1);
    set_any = true;
  }
  // OpenBLAS's Haswell (AVX2 + FMA) kernels run on every x86 CPU since 2013; unset elsewhere, or where the
  // caller chose other kernels.
#if defined(__x86_64__)
  if (std::getenv("OPENBLAS_CORETYPE") == nullptr && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    ::setenv("OPENBLAS_CORETYPE", "Haswell", 1);
    set_any = true;
  }
#endif
  if (set_any) ::execv("/proc/self/exe", argv);  // returns only when it fails: run with what there is
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
