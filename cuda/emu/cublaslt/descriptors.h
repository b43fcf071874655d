// The emulated cuBLASLt's descriptor contents, with cuBLASLt's defaults (cublasLt.h documents each
// attribute's type and default), and the entry points shared by the API, the rules and the product.
#pragma once

#include "emu/cublaslt/cublaslt.h"

#include <string>

struct cublasLtContext {
  uint64_t magic;
};

struct cublasLtMatmulDescOpaque_t {
  int32_t compute_type;
  int32_t scale_type;
  int32_t pointer_mode = CUBLASLT_POINTER_MODE_HOST;
  int32_t transa = CUBLAS_OP_N;
  int32_t transb = CUBLAS_OP_N;
  int32_t transc = CUBLAS_OP_N;
  uint32_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const void* bias = nullptr;
  int64_t bias_batch_stride = 0;
  void* aux = nullptr;
  int64_t aux_ld = 0;
  int64_t aux_batch_stride = 0;
  const void* a_scale = nullptr;
  const void* b_scale = nullptr;
  const void* c_scale = nullptr;
  const void* d_scale = nullptr;
  void* amax_d = nullptr;
  int32_t aux_type = -1;  // -1: the default, which depends on the operand types (rules.cpp)
  int8_t fast_accum = 0;
  int32_t bias_type = -1;
};

struct cublasLtMatrixLayoutOpaque_t {
  uint32_t type;
  int32_t order = CUBLASLT_ORDER_COL;
  uint64_t rows;
  uint64_t cols;
  int64_t ld;
  int32_t batch_count = 1;
  int64_t batch_stride = 0;
};

// The alignments an algorithm may assume of the A, B, C and D pointers (cublasLt.h: 256 bytes unless
// the caller says less); the heuristic's algorithm keeps them and cublasLtMatmul refuses pointers that
// are less aligned.
struct cublasLtMatmulPreferenceOpaque_t {
  uint32_t search_mode = 0;
  uint64_t max_workspace_bytes = 0;
  uint32_t min_alignment_a = 256;
  uint32_t min_alignment_b = 256;
  uint32_t min_alignment_c = 256;
  uint32_t min_alignment_d = 256;
};

namespace gpt::emu::cublaslt {

constexpr uint64_t kHandleMagic = 0x6375626c61734c74ull;  // "cublasLt"

// Records why a call failed (cublaslt_last_refusal) and returns its status.
cublasStatus_t refuse(cublasStatus_t status, std::string why);
void clear_refusal();

// A matmul whose descriptors passed the rules, with every default resolved.
struct Problem {
  const cublasLtMatmulDescOpaque_t* desc;
  const cublasLtMatrixLayoutOpaque_t *a, *b, *c, *d;
  int64_t m, n, k, batch;
  bool trans_a, trans_b;
  bool fp8;   // FP8 operands: the scale pointers and D amax apply
  bool tf32;  // CUBLAS_COMPUTE_32F_FAST_TF32: A and B rounded to TF32 before the product
  cudaDataType_t bias_type, aux_type;
};

// Checks the descriptors against what cuBLASLt supports (rules.cpp); SUCCESS fills *problem.
cublasStatus_t check_problem(const cublasLtMatmulDescOpaque_t* desc, const cublasLtMatrixLayoutOpaque_t* a,
                             const cublasLtMatrixLayoutOpaque_t* b, const cublasLtMatrixLayoutOpaque_t* c,
                             const cublasLtMatrixLayoutOpaque_t* d, Problem* problem);

// The checks that need the call's pointers (rules.cpp).
cublasStatus_t check_pointers(const Problem& p, const void* alpha, const void* beta, const void* A, const void* B,
                              const void* C, const void* D);

// Computes D (and the epilogue's outputs) for a checked problem (matmul.cpp).
void run_matmul(const Problem& p, float alpha, float beta, const void* A, const void* B, const void* C, void* D);

}  // namespace gpt::emu::cublaslt
