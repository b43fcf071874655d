// cudaDataType_t (library_types.h of the toolkit), with the toolkit's enumerator values: the emulated
// cuBLASLt takes the same integers a GPU build passes, and tests/cuda/emu/test_cublaslt_enums.cpp checks
// each value against /usr/local/cuda/include/library_types.h where the toolkit is installed.
#pragma once

#define GPT_EMU_CUDA_DATA_TYPES(X) \
  X(CUDA_R_32F, 0)                 \
  X(CUDA_R_64F, 1)                 \
  X(CUDA_R_16F, 2)                 \
  X(CUDA_R_8I, 3)                  \
  X(CUDA_R_32I, 10)                \
  X(CUDA_R_16BF, 14)               \
  X(CUDA_R_8F_E4M3, 28)            \
  X(CUDA_R_8F_E5M2, 29)

#define GPT_EMU_ENUMERATOR(name, value) name = value,
typedef enum cudaDataType_t { GPT_EMU_CUDA_DATA_TYPES(GPT_EMU_ENUMERATOR) } cudaDataType;
#undef GPT_EMU_ENUMERATOR
