// Host emulation of CUDA's number formats (cuda_bf16.h, cuda_fp16.h, cuda_fp8.h: __nv_bfloat16, __half,
// their pairs, __nv_fp8_e4m3, __nv_fp8_e5m2) and of the device math functions our kernels use. The
// rounding rules are precision/float_formats.h's, tested exhaustively there and against the toolkit's
// own host conversions in tests/cuda/emu/test_formats*.cpp.
#pragma once

#include "emu/formats/bf16.h"
#include "emu/formats/fast_math.h"
#include "emu/formats/fp16.h"
#include "emu/formats/fp8.h"
#include "emu/formats/rounded_intrinsics.h"
