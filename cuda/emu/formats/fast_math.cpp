// __expf and __logf for the emulated kernels (see fast_math.h): glibc's <math.h> declares them with C
// linkage but libm does not export them, so the emulator defines them.
#include "emu/formats/fast_math.h"

extern "C" float __expf(float x) noexcept { return expf(x); }
extern "C" float __logf(float x) noexcept { return logf(x); }
