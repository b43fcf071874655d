// GPT_UNROLL: full unrolling of a fixed-trip loop over a thread's register arrays, so every index is a
// constant and the arrays stay in registers (a loop nvcc leaves rolled puts its array in local memory).
// GPT_UNROLL_BY(n): unrolling by n of a loop whose trip count is known only at run time. The host
// compiler (the emulator) needs no hint and gets none.
#pragma once

#if defined(__CUDA_ARCH__)
#define GPT_PRAGMA(text) _Pragma(#text)
#define GPT_UNROLL _Pragma("unroll")
#define GPT_UNROLL_BY(n) GPT_PRAGMA(unroll n)
#else
#define GPT_UNROLL
#define GPT_UNROLL_BY(n)
#endif
