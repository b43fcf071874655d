// The one include for the CUDA runtime, number formats and intrinsics in our CUDA sources: the toolkit's
// headers in a GPU build, cuda/emu's host emulation in the emulator build (GPT_CUDA_EMU), so every .cu
// file has one source for both.
#pragma once

#if defined(GPT_CUDA_EMU)
#include "emu/runtime.h"
#include "emu/formats.h"
#else
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#endif
