// Our wrappers of the sm_80+ tensor-core and async-copy instructions: inline PTX in a GPU build, the
// emulator's warp collectives (emu/tensor_core.h) in the emulator build, with the same fragments.
//
//   cp_async<B>(dst, src, n)   cp.async.{cg,ca}.shared.global, B = 16, 8 or 4 bytes: n (0..B) copied, the
//                              rest zeroed (16 bytes bypass L1 with .cg; smaller copies take .ca only)
//   cp_async_commit()          cp.async.commit_group
//   cp_async_wait<N>()         cp.async.wait_group N: all but the newest N committed groups are done
//   ldmatrix<count, trans>     ldmatrix.sync.aligned.m8n8.x{1,2,4}[.trans].shared.b16
//   mma_m16n8k16<input>        mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}.{bf16,f16}.f32
//
// Fragment layouts (PTX ISA 9.7.14.5.8), groupID g = lane >> 2, t = lane % 4, register r holding elements
// 2r (low half) and 2r+1: A a_i at (g + 8*((i>>1)&1), 2t + (i&1) + 8*(i>=4)); B b_i at
// (2t + (i&1) + 8*(i>=2), g); C/D c_i at (g + 8*(i>=2), 2t + (i&1)).
#pragma once

#include <cstdint>

#include "common/cuda_api.h"
#if defined(GPT_CUDA_EMU)
#include "emu/tensor_core.h"
#endif

// Whether this compilation pass has the instructions (cp.async and mma.m16n8k16 are Ampere's, sm_80):
// the host pass and the emulator do; device code for Turing (sm_75, the oldest CUDA 13 compiles for) does
// not. A kernel that uses these wrappers compiles its body only where GPT_HAS_SM80_MMA is 1 and traps
// elsewhere, and its host code never launches it on such a device; a kernel that forgot the guard fails
// the sm_75 build in ptxas, naming the instruction.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#define GPT_HAS_SM80_MMA 0
#else
#define GPT_HAS_SM80_MMA 1
#endif

namespace gpt::cuda {

enum class MmaInput { kBf16, kF16 };

template <int kBytes>
__device__ __forceinline__ void cp_async(void* smem_dst, const void* gmem_src, int src_bytes = kBytes) {
  static_assert(kBytes == 4 || kBytes == 8 || kBytes == 16, "cp.async copies 4, 8 or 16 bytes");
#if defined(GPT_CUDA_EMU)
  emu::detail::cp_async(smem_dst, gmem_src, kBytes, static_cast<size_t>(src_bytes));
#elif defined(__CUDA_ARCH__)
  const auto dst = static_cast<unsigned>(__cvta_generic_to_shared(smem_dst));
  if constexpr (kBytes == 16)
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(gmem_src), "r"(src_bytes));
  else
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(dst), "l"(gmem_src), "n"(kBytes),
                 "r"(src_bytes));
#endif
}

__device__ __forceinline__ void cp_async_commit() {
#if defined(GPT_CUDA_EMU)
  emu::detail::cp_async_commit();
#elif defined(__CUDA_ARCH__)
  asm volatile("cp.async.commit_group;\n" ::);
#endif
}

template <int N>
__device__ __forceinline__ void cp_async_wait() {
  static_assert(N >= 0 && N < 8, "cp.async.wait_group takes 0..7");
#if defined(GPT_CUDA_EMU)
  emu::detail::cp_async_wait(N);
#elif defined(__CUDA_ARCH__)
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
#endif
}

// Lanes 8j..8j+7 pass the addresses of rows 0..7 of matrix j (16-byte aligned rows of eight 16-bit
// elements in shared memory); every lane of the warp must call it.
template <int kCount, bool kTrans = false>
__device__ __forceinline__ void ldmatrix(uint32_t (&r)[kCount], const void* smem_row) {
  static_assert(kCount == 1 || kCount == 2 || kCount == 4, "ldmatrix loads 1, 2 or 4 matrices");
#if defined(GPT_CUDA_EMU)
  emu::detail::ldmatrix(kCount, kTrans, smem_row, r);
#elif defined(__CUDA_ARCH__)
  const auto a = static_cast<unsigned>(__cvta_generic_to_shared(smem_row));
  if constexpr (kCount == 1 && !kTrans)
    asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];\n" : "=r"(r[0]) : "r"(a));
  else if constexpr (kCount == 1)
    asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];\n" : "=r"(r[0]) : "r"(a));
  else if constexpr (kCount == 2 && !kTrans)
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n" : "=r"(r[0]), "=r"(r[1]) : "r"(a));
  else if constexpr (kCount == 2)
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
                 : "=r"(r[0]), "=r"(r[1])
                 : "r"(a));
  else if constexpr (!kTrans)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
#endif
}

// d = a * b + c for one 16x8x16 tile, FP32 accumulators; every lane of the warp must call it.
template <MmaInput kInput>
__device__ __forceinline__ void mma_m16n8k16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2],
                                             const float (&c)[4]) {
#if defined(GPT_CUDA_EMU)
  emu::detail::mma_m16n8k16(kInput == MmaInput::kBf16 ? emu::detail::MmaInput::kBf16 : emu::detail::MmaInput::kF16,
                            a, b, c, d);
#elif defined(__CUDA_ARCH__)
  if constexpr (kInput == MmaInput::kBf16)
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%10, %11, %12, %13};\n"
        : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]), "f"(c[2]),
          "f"(c[3]));
  else
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%10, %11, %12, %13};\n"
        : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]), "f"(c[2]),
          "f"(c[3]));
#endif
}

}  // namespace gpt::cuda
