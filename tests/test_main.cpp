// gpt_tests' main: the process settings ctest cannot give it, then Google Test.
//
// gtest_discover_tests passes a list-valued ENVIRONMENT on as separate words, which set_tests_properties reads
// as property-value pairs, so only the first variable of such a list ever reached the tests. What the tests
// need beyond OMP_NUM_THREADS is therefore set here, where no CMake quoting stands in between.
#include <gtest/gtest.h>

#include <cstdlib>

#include "cli/openmp_env.h"

// LeakSanitizer (sanitizer builds) asks for this at start-up. fontconfig, which PLplot's cairo driver loads
// for `gpt-train report`, keeps its caches until the process exits, and so do cairo and pango.
extern "C" const char* __lsan_default_suppressions() {
  return "leak:libfontconfig.so\n"
         "leak:libcairo.so\n"
         "leak:libpango\n"
         "leak:libplplot\n";
}

int main(int argc, char** argv) {
  // The tests train in process: bound libgomp's spinning as gpt-train does for itself (the shared cores of a
  // CI machine make default spinning many times slower). The marker only describes gpt-train's own log line,
  // and the gpt-train processes the tests start must choose for themselves.
  gpt::bound_openmp_spinning(argv);
  ::unsetenv(gpt::kSpinCountMarker);
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
