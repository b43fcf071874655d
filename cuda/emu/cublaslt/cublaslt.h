// Host emulation of the cuBLASLt subset the CUDA backend uses: handle, matmul descriptor, matrix layouts,
// preference, heuristic and cublasLtMatmul, with the toolkit's names, signatures and enumerator values.
//
// The product is computed on the CPU from cuBLASLt's documented column-major semantics (cuBLAS docs,
// "cuBLASLt API" > "cublasLtMatmul()"): D = epilogue(alpha * op(A) op(B) + beta * C), FP32 accumulation,
// FP32 alpha and beta. Operand memory is what the emulator's cudaMalloc returns, plain host memory, so
// the product runs synchronously on the calling thread once the work queued earlier on its stream has
// run: the emulator's streams run in order, and finishing the work before the call returns is one valid
// schedule of cuBLASLt's asynchronous call.
// What is supported and what is refused (and with which status) is listed in rules.cpp.
#pragma once

#include "emu/cublaslt/enums.h"
#include "emu/library_types.h"
#include "emu/runtime.h"

#include <cstddef>
#include <cstdint>

struct cublasLtContext;
using cublasLtHandle_t = cublasLtContext*;

// The descriptors' contents are the emulator's (emu/cublaslt/descriptors.h); callers see pointers only,
// as they must with the toolkit's semi-opaque structs, whose size differs.
struct cublasLtMatmulDescOpaque_t;
struct cublasLtMatrixLayoutOpaque_t;
struct cublasLtMatmulPreferenceOpaque_t;
using cublasLtMatmulDesc_t = cublasLtMatmulDescOpaque_t*;
using cublasLtMatrixLayout_t = cublasLtMatrixLayoutOpaque_t*;
using cublasLtMatmulPreference_t = cublasLtMatmulPreferenceOpaque_t*;

typedef struct {
  uint64_t data[8];
} cublasLtMatmulAlgo_t;

typedef struct {
  cublasLtMatmulAlgo_t algo;
  size_t workspaceSize;
  cublasStatus_t state;
  float wavesCount;
  int reserved[4];
} cublasLtMatmulHeuristicResult_t;

// The enumerator's name ("CUBLAS_STATUS_NOT_SUPPORTED"); the string adds the emulator's last refusal reason
// when the status is that of the last failed call on this thread.
const char* cublasLtGetStatusName(cublasStatus_t status);
const char* cublasLtGetStatusString(cublasStatus_t status);

cublasStatus_t cublasLtCreate(cublasLtHandle_t* handle);
cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle);

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* desc, cublasComputeType_t compute_type,
                                        cudaDataType_t scale_type);
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc);
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr,
                                              const void* buf, size_t size);
cublasStatus_t cublasLtMatmulDescGetAttribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr,
                                              void* buf, size_t size, size_t* size_written);

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* layout, cudaDataType type, uint64_t rows,
                                          uint64_t cols, int64_t ld);
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout);
cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t layout, cublasLtMatrixLayoutAttribute_t attr,
                                                const void* buf, size_t size);
cublasStatus_t cublasLtMatrixLayoutGetAttribute(cublasLtMatrixLayout_t layout, cublasLtMatrixLayoutAttribute_t attr,
                                                void* buf, size_t size, size_t* size_written);

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref);
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref);
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr, const void* buf,
                                                    size_t size);
cublasStatus_t cublasLtMatmulPreferenceGetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr, void* buf, size_t size,
                                                    size_t* size_written);

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
                                              cublasLtMatrixLayout_t a_desc, cublasLtMatrixLayout_t b_desc,
                                              cublasLtMatrixLayout_t c_desc, cublasLtMatrixLayout_t d_desc,
                                              cublasLtMatmulPreference_t pref, int requested_count,
                                              cublasLtMatmulHeuristicResult_t results[], int* returned_count);

cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void* alpha, const void* A,
                              cublasLtMatrixLayout_t a_desc, const void* B, cublasLtMatrixLayout_t b_desc,
                              const void* beta, const void* C, cublasLtMatrixLayout_t c_desc, void* D,
                              cublasLtMatrixLayout_t d_desc, const cublasLtMatmulAlgo_t* algo, void* workspace,
                              size_t workspace_size, cudaStream_t stream);

namespace gpt::emu {

// Why the last cuBLASLt call on this thread returned something other than CUBLAS_STATUS_SUCCESS (the
// real library says so only in its log, CUBLASLT_LOG_LEVEL); empty after a success.
const char* cublaslt_last_refusal();

}  // namespace gpt::emu
