// Host emulation of the CUDA runtime API and execution model (GPT_CUDA_EMU builds only).
// Skeleton: the types the other emulation headers need; the execution model lands in this file's family.
#pragma once

#include <cstddef>

enum cudaError_t { cudaSuccess = 0 };
struct CUstream_st;
using cudaStream_t = CUstream_st*;
