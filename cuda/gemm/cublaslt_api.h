// cuBLASLt for our matrix products: the library in a GPU build, its host emulation (cuda/emu/cublaslt)
// in the emulator build, which follows cuBLASLt's documented semantics and refuses what it refuses.
#pragma once

#include "common/cuda_api.h"

#if defined(GPT_CUDA_EMU)
#include "emu/cublaslt/cublaslt.h"
#else
#include <cublasLt.h>
#endif
