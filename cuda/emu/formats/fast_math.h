// The device math functions our kernels use, on the host's libm. The GPU's versions are not correctly
// rounded, so a kernel test comparing the emulator with a GPU (or with the CPU backend) must allow at
// least the GPU's documented error for each function it calls. The bounds below are those of the CUDA
// C++ Programming Guide, appendix "Mathematical Functions" (tables of standard functions and of
// intrinsics, maximum ulp error versus the correctly rounded result); the host's glibc functions are
// within 1 ulp of it (glibc manual, "Known Maximum Errors in Math Functions"), which the column adds.
//
//   function          GPU bound (Programming Guide)                          tolerance vs this emulation
//   __expf(x)         2 + floor(|1.173 x|) ulp                               3 + floor(|1.173 x|) ulp
//   __logf(x)         2^-21.41 absolute for x in [0.5, 2], else 3 ulp        2^-21 absolute / 4 ulp
//   __fdividef(x, y)  2 ulp for |y| in [2^-126, 2^126]; 0 for larger |y|     3 ulp (|y| in range only)
//   exp2f(x)          2 ulp                                                  3 ulp
//   rsqrtf(x)         2 ulp                                                  3 ulp
//   tanhf(x)          2 ulp                                                  3 ulp
//   erff(x)           2 ulp                                                  3 ulp
//
// Under -use_fast_math nvcc also maps expf, logf and x / y to the intrinsics above and flushes float
// subnormals to zero (ftz); the emulation never flushes, so a test must not depend on subnormal float
// results. exp2f, tanhf and erff are the C library's own. glibc's <math.h> declares __expf and __logf
// (its internal names of expf and logf) without exporting them, so fast_math.cpp defines them with that
// declaration's C linkage.
#pragma once

#include <math.h>  // erff, exp2f, tanhf, __expf, __logf in the global namespace

#include <cmath>

namespace gpt::emu {

inline float __fdividef(float x, float y) { return x / y; }
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }

}  // namespace gpt::emu

using gpt::emu::__fdividef;
using gpt::emu::rsqrtf;
