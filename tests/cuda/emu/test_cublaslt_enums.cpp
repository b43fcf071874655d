// Every enumerator value of the emulated cuBLASLt (emu/cublaslt/enums.h) and of cudaDataType_t
// (emu/library_types.h) against the toolkit's cublasLt.h / library_types.h, at compile time. The
// emulator's headers are included inside a namespace so both sets of names can meet here; they include
// nothing else, which makes that possible.
#include <gtest/gtest.h>

#if __has_include(<cublasLt.h>)
#include <cublasLt.h>
#include <library_types.h>

namespace emu_names {
#include "emu/cublaslt/enums.h"
#include "emu/library_types.h"
}  // namespace emu_names

#define GPT_CHECK_ENUMERATOR(name, value)                                                       \
  static_assert(static_cast<long>(::name) == (value), #name " differs from the toolkit");      \
  static_assert(static_cast<long>(emu_names::name) == (value), #name " differs in the emulator");
GPT_EMU_CUDA_DATA_TYPES(GPT_CHECK_ENUMERATOR)
GPT_EMU_CUBLAS_STATUS(GPT_CHECK_ENUMERATOR)
GPT_EMU_CUBLAS_OPERATION(GPT_CHECK_ENUMERATOR)
GPT_EMU_CUBLAS_COMPUTE_TYPE(GPT_CHECK_ENUMERATOR)
GPT_EMU_CUBLASLT_POINTER_MODE(GPT_CHECK_ENUMERATOR)
GPT_EMU_CUBLASLT_ORDER(GPT_CHECK_ENUMERATOR)
GPT_EMU_CUBLASLT_MATRIX_LAYOUT_ATTRIBUTE(GPT_CHECK_ENUMERATOR)
GPT_EMU_CUBLASLT_MATMUL_DESC_ATTRIBUTE(GPT_CHECK_ENUMERATOR)
GPT_EMU_CUBLASLT_EPILOGUE(GPT_CHECK_ENUMERATOR)
GPT_EMU_CUBLASLT_MATMUL_PREFERENCE_ATTRIBUTE(GPT_CHECK_ENUMERATOR)
#undef GPT_CHECK_ENUMERATOR

// The result struct's layout matters to code that copies heuristic results around.
static_assert(sizeof(cublasLtMatmulHeuristicResult_t) == 96 && sizeof(cublasLtMatmulAlgo_t) == 64);

// The checks above run at compile time; this test records in the test log that they were compiled in.
TEST(CublasLtEnums, MatchTheToolkitHeader) { SUCCEED(); }
#else
TEST(CublasLtEnums, MatchTheToolkitHeader) { GTEST_SKIP() << "cublasLt.h not found: the CUDA toolkit's headers are not installed"; }
#endif
