// The emulation of our tensor-core and async-copy wrappers (common/mma.cuh): warp collectives that move
// each 16-bit element where the PTX ISA's fragment layouts put it.
#pragma once

#include <cstdint>

#include "emu/scheduler.h"

namespace gpt::cuda::emu::detail {

// ldmatrix.sync.aligned.m8n8.x{count}[.trans].shared.b16: lanes 8j..8j+7 give the row addresses of
// matrix j; regs[j] receives this lane's two elements of matrix j.
void ldmatrix(int count, bool trans, const void* row_address, uint32_t* regs);

// mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}.{bf16,f16}.f32: d = a * b + c over the warp's
// fragments. The products are exact and summed in double, then rounded once to FP32; the GPU's
// accumulation order and rounding are unspecified, so results agree with a GPU to a tolerance only.
enum class MmaInput { kBf16, kF16 };
void mma_m16n8k16(MmaInput input, const uint32_t* a, const uint32_t* b, const float* c, float* d);

}  // namespace gpt::cuda::emu::detail
