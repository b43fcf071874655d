#include "cli/openmp_env.h"

#include <fmt/format.h>

#include <cstdlib>

#include <unistd.h>

namespace gpt {

void bound_openmp_spinning(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr || std::getenv("GOMP_SPINCOUNT") != nullptr) return;
  if (::setenv("GOMP_SPINCOUNT", kSpinCount, 1) != 0 || ::setenv(kSpinCountMarker, "1", 1) != 0) return;
  ::execv("/proc/self/exe", argv);
  // Still here: no /proc (or no exec rights); run with libgomp's defaults rather than not at all.
  ::unsetenv("GOMP_SPINCOUNT");
  ::unsetenv(kSpinCountMarker);
}

std::string openmp_wait_description() {
  if (std::getenv(kSpinCountMarker) != nullptr)
    return fmt::format("OpenMP threads spin for GOMP_SPINCOUNT={} iterations, then sleep (gpt-train's default, for "
                       "shared cores; set OMP_WAIT_POLICY or GOMP_SPINCOUNT to choose)", kSpinCount);
  if (std::getenv("OMP_WAIT_POLICY") != nullptr || std::getenv("GOMP_SPINCOUNT") != nullptr)
    return "OpenMP wait policy from the environment (OMP_WAIT_POLICY / GOMP_SPINCOUNT)";
  return "OpenMP threads spin for libgomp's default before they sleep";
}

}  // namespace gpt
