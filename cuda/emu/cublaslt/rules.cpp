// What the emulated cuBLASLt accepts, and how it refuses the rest: the same status cuBLASLt returns, so
// a call the GPU would refuse fails in CI too. Sources: cuBLAS documentation (CUDA 13), sections
// "cublasLtMatmul()" (its tables of supported type combinations, the FP8 requirements), "Tensor Core
// Usage" (alignment), and the attribute comments of cublasLt.h. Where the documentation does not say
// which status a refusal returns, the choice is marked "emulator's choice".
//
// Accepted:
//   - compute CUBLAS_COMPUTE_32F (or _PEDANTIC), or _32F_FAST_TF32 with F32 A and B; scale type CUDA_R_32F;
//     alpha and beta from host or device memory (POINTER_MODE_HOST / _DEVICE)
//   - types (A, B, C, D): all F32; all BF16; all F16; BF16 or F16 inputs with F32 C and D
//     ("cublasLtMatmul()" table, compute 32F rows)
//   - FP8 (A, B) in {E4M3 x E4M3, E4M3 x E5M2, E5M2 x E4M3} with C in {BF16, F16, F32}; D = C, or D E4M3
//     (E5M2 too when an input is E5M2) with a 16-bit C; bias BF16 for F32 C, else C's type (the FP8 table)
//   - column-major layouts (ORDER_COL), any ld >= rows, strided batches (equal counts)
//   - epilogues DEFAULT, BIAS, GELU, GELU_BIAS, GELU_AUX, GELU_AUX_BIAS, DGELU, DGELU_BGRAD, BGRADA, BGRADB
// Refused:
//   - FP8 A not transposed or B transposed (Hopper/Ada need "TN", FP8 requirements): NOT_SUPPORTED
//   - FP8 with k, m * sizeof(C), lda, ldb, ldc * sizeof(C), ldd * sizeof(D) not multiples of 16 bytes, or
//     pointers not 16-byte aligned ("Tensor Core Usage", required for FP8): NOT_SUPPORTED
//   - E5M2 x E5M2, FP8 mixed with a 16-bit input, any other type combination: NOT_SUPPORTED
//   - A/B/C scale pointers or D amax without FP8 inputs, D scale without FP8 D: INVALID_VALUE (the
//     attributes' comments in cublasLt.h)
//   - dimensions that do not chain (op(A) m x k, op(B) k x n, C and D m x n), ld < rows, unequal batch
//     counts: INVALID_VALUE
//   - EPILOGUE_AUX_LD below rows or not a multiple of 8, aux batch stride not a multiple of 8 (cublasLt.h):
//     INVALID_VALUE (emulator's choice of status)
//   - TRANSC other than N (cublasLt.h: "only CUBLAS_OP_N is supported"): NOT_SUPPORTED
//   - (cublasLtMatmul) an A, B, C or D pointer less aligned than min(16, the preference's
//     MIN_ALIGNMENT_*_BYTES, default 256) the heuristic assumed: NOT_SUPPORTED (emulator's choice)
//   - what this emulation does not model, though cuBLASLt has it: other orders (ROW, COL32, ...), RELU
//     epilogues, other compute types (16F, 32F_FAST_16F/16BF, 64F, 32I), device-vector alpha, bias or aux
//     types other than the default, aux epilogues with an FP8 D: NOT_SUPPORTED, with the reason in
//     cublaslt_last_refusal().
// The workspace is not modelled: every emulated algorithm needs none, so none is ever too small.
#include "emu/cublaslt/descriptors.h"

#include <fmt/format.h>

namespace gpt::emu::cublaslt {
namespace {

bool is_fp8(int32_t t) { return t == CUDA_R_8F_E4M3 || t == CUDA_R_8F_E5M2; }
bool is_16bit(int32_t t) { return t == CUDA_R_16BF || t == CUDA_R_16F; }

int64_t type_size(int32_t t) {
  switch (t) {
    case CUDA_R_32F: return 4;
    case CUDA_R_16F:
    case CUDA_R_16BF: return 2;
    case CUDA_R_8F_E4M3:
    case CUDA_R_8F_E5M2: return 1;
    default: return 0;
  }
}

bool has_bias(uint32_t e) {
  return e == CUBLASLT_EPILOGUE_BIAS || e == CUBLASLT_EPILOGUE_GELU_BIAS || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
}
bool has_bias_gradient(uint32_t e) {
  return e == CUBLASLT_EPILOGUE_DGELU_BGRAD || e == CUBLASLT_EPILOGUE_BGRADA || e == CUBLASLT_EPILOGUE_BGRADB;
}
bool has_aux(uint32_t e) {
  return e == CUBLASLT_EPILOGUE_GELU_AUX || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS || e == CUBLASLT_EPILOGUE_DGELU ||
         e == CUBLASLT_EPILOGUE_DGELU_BGRAD;
}

cublasStatus_t check_types(const Problem& p, const cublasLtMatmulDescOpaque_t& d) {
  const int32_t ta = static_cast<int32_t>(p.a->type), tb = static_cast<int32_t>(p.b->type);
  const int32_t tc = static_cast<int32_t>(p.c->type), td = static_cast<int32_t>(p.d->type);
  const auto unsupported = [&] {
    return refuse(CUBLAS_STATUS_NOT_SUPPORTED,
                  fmt::format("type combination A {} B {} C {} D {} is not supported", ta, tb, tc, td));
  };
  if (is_fp8(ta) || is_fp8(tb)) {
    if (!is_fp8(ta) || !is_fp8(tb)) return unsupported();
    if (ta == CUDA_R_8F_E5M2 && tb == CUDA_R_8F_E5M2) return unsupported();
    if (!is_16bit(tc) && tc != CUDA_R_32F) return unsupported();
    if (is_fp8(td)) {
      if (!is_16bit(tc)) return unsupported();
      if (td == CUDA_R_8F_E5M2 && ta != CUDA_R_8F_E5M2 && tb != CUDA_R_8F_E5M2) return unsupported();
    } else if (td != tc) {
      return unsupported();
    }
  } else {
    const bool same = ta == tb && tb == tc && tc == td && (ta == CUDA_R_32F || is_16bit(ta));
    const bool widened = ta == tb && is_16bit(ta) && tc == CUDA_R_32F && td == CUDA_R_32F;
    if (!same && !widened) return unsupported();
  }
  if (d.compute_type == CUBLAS_COMPUTE_32F_FAST_TF32 && (ta != CUDA_R_32F || tb != CUDA_R_32F))
    return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "CUBLAS_COMPUTE_32F_FAST_TF32 needs F32 A and B");
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t check_layout(const cublasLtMatrixLayoutOpaque_t* l, const char* name) {
  if (l->order != CUBLASLT_ORDER_COL)
    return refuse(CUBLAS_STATUS_NOT_SUPPORTED, fmt::format("{}: only CUBLASLT_ORDER_COL is emulated", name));
  if (type_size(static_cast<int32_t>(l->type)) == 0)
    return refuse(CUBLAS_STATUS_NOT_SUPPORTED, fmt::format("{}: data type {} is not emulated", name, l->type));
  if (l->ld < static_cast<int64_t>(l->rows) || l->ld < 1)
    return refuse(CUBLAS_STATUS_INVALID_VALUE, fmt::format("{}: ld {} < rows {}", name, l->ld, l->rows));
  if (l->batch_count < 1 || l->batch_stride < 0)
    return refuse(CUBLAS_STATUS_INVALID_VALUE, fmt::format("{}: batch count {} stride {}", name, l->batch_count, l->batch_stride));
  return CUBLAS_STATUS_SUCCESS;
}

// "Tensor Core Usage", required of FP8: sizes and leading dimensions in bytes multiples of 16.
cublasStatus_t check_fp8_alignment(const Problem& p) {
  const int64_t sc = type_size(static_cast<int32_t>(p.c->type)), sd = type_size(static_cast<int32_t>(p.d->type));
  const struct {
    int64_t bytes;
    const char* what;
  } rules[] = {{p.k, "k"},
               {p.m * sc, "m * sizeof(C)"},
               {p.a->ld, "lda"},
               {p.b->ld, "ldb"},
               {p.c->ld * sc, "ldc * sizeof(C)"},
               {p.d->ld * sd, "ldd * sizeof(D)"}};
  for (const auto& r : rules)
    if (r.bytes % 16 != 0)
      return refuse(CUBLAS_STATUS_NOT_SUPPORTED, fmt::format("FP8: {} = {} bytes is not a multiple of 16", r.what, r.bytes));
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t check_epilogue(Problem& p, const cublasLtMatmulDescOpaque_t& d) {
  const uint32_t e = d.epilogue;
  switch (e) {
    case CUBLASLT_EPILOGUE_DEFAULT:
    case CUBLASLT_EPILOGUE_BIAS:
    case CUBLASLT_EPILOGUE_GELU:
    case CUBLASLT_EPILOGUE_GELU_BIAS:
    case CUBLASLT_EPILOGUE_GELU_AUX:
    case CUBLASLT_EPILOGUE_GELU_AUX_BIAS:
    case CUBLASLT_EPILOGUE_DGELU:
    case CUBLASLT_EPILOGUE_DGELU_BGRAD:
    case CUBLASLT_EPILOGUE_BGRADA:
    case CUBLASLT_EPILOGUE_BGRADB: break;
    case CUBLASLT_EPILOGUE_RELU:
    case CUBLASLT_EPILOGUE_RELU_AUX:
    case CUBLASLT_EPILOGUE_RELU_BIAS:
    case CUBLASLT_EPILOGUE_RELU_AUX_BIAS:
    case CUBLASLT_EPILOGUE_DRELU:
    case CUBLASLT_EPILOGUE_DRELU_BGRAD:
      return refuse(CUBLAS_STATUS_NOT_SUPPORTED, fmt::format("epilogue {} (ReLU) is not emulated", e));
    default: return refuse(CUBLAS_STATUS_INVALID_VALUE, fmt::format("unknown epilogue {}", e));
  }
  // The bias (gradient) vector is of D's type, except for FP8 kernels: BF16 with an F32 C, else C's type
  // (cublasLt.h, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, and the FP8 table).
  const int32_t tc = static_cast<int32_t>(p.c->type), td = static_cast<int32_t>(p.d->type);
  const int32_t bias_default = !p.fp8 ? td : (tc == CUDA_R_32F ? CUDA_R_16BF : tc);
  if (d.bias_type != -1 && d.bias_type != bias_default)
    return refuse(CUBLAS_STATUS_NOT_SUPPORTED,
                  fmt::format("bias type {} is not emulated here; this combination takes {}", d.bias_type, bias_default));
  p.bias_type = static_cast<cudaDataType_t>(bias_default);
  // The GELU input matrix takes D's type (cublasLt.h, EPILOGUE_AUX_DATA_TYPE). With an FP8 D it is E4M3
  // or F16 "with some restrictions", scaled by EPILOGUE_AUX_SCALE_POINTER: not emulated.
  if (has_aux(e) && is_fp8(td))
    return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "aux epilogues with an FP8 D (scaled aux) are not emulated");
  const int32_t aux_default = td;
  if (d.aux_type != -1 && d.aux_type != aux_default)
    return refuse(CUBLAS_STATUS_NOT_SUPPORTED,
                  fmt::format("aux type {} is not emulated here; this combination takes {}", d.aux_type, aux_default));
  p.aux_type = static_cast<cudaDataType_t>(aux_default);
  if (has_aux(e)) {
    if (d.aux_ld < p.m || d.aux_ld % 8 != 0)
      return refuse(CUBLAS_STATUS_INVALID_VALUE,
                    fmt::format("EPILOGUE_AUX_LD {} must be >= rows {} and a multiple of 8", d.aux_ld, p.m));
    if (p.batch > 1 && d.aux_batch_stride % 8 != 0)
      return refuse(CUBLAS_STATUS_INVALID_VALUE,
                    fmt::format("EPILOGUE_AUX_BATCH_STRIDE {} must be a multiple of 8", d.aux_batch_stride));
  }
  return CUBLAS_STATUS_SUCCESS;
}

}  // namespace

cublasStatus_t check_problem(const cublasLtMatmulDescOpaque_t* desc, const cublasLtMatrixLayoutOpaque_t* a,
                             const cublasLtMatrixLayoutOpaque_t* b, const cublasLtMatrixLayoutOpaque_t* c,
                             const cublasLtMatrixLayoutOpaque_t* d, Problem* problem) {
  if (desc == nullptr || a == nullptr || b == nullptr || c == nullptr || d == nullptr)
    return refuse(CUBLAS_STATUS_INVALID_VALUE, "null descriptor or layout");
  const auto& dd = *desc;
  if (dd.compute_type != CUBLAS_COMPUTE_32F && dd.compute_type != CUBLAS_COMPUTE_32F_PEDANTIC &&
      dd.compute_type != CUBLAS_COMPUTE_32F_FAST_TF32)
    return refuse(CUBLAS_STATUS_NOT_SUPPORTED, fmt::format("compute type {} is not emulated", dd.compute_type));
  if (dd.scale_type != CUDA_R_32F)
    return refuse(CUBLAS_STATUS_NOT_SUPPORTED, fmt::format("scale type {} with compute 32F", dd.scale_type));
  if (dd.pointer_mode != CUBLASLT_POINTER_MODE_HOST && dd.pointer_mode != CUBLASLT_POINTER_MODE_DEVICE)
    return refuse(CUBLAS_STATUS_NOT_SUPPORTED, fmt::format("pointer mode {} is not emulated", dd.pointer_mode));
  const auto valid_op = [](int32_t op) { return op == CUBLAS_OP_N || op == CUBLAS_OP_T || op == CUBLAS_OP_C; };
  if (!valid_op(dd.transa) || !valid_op(dd.transb))
    return refuse(CUBLAS_STATUS_INVALID_VALUE, fmt::format("TRANSA {} / TRANSB {}", dd.transa, dd.transb));
  if (dd.transc != CUBLAS_OP_N) return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "TRANSC must be CUBLAS_OP_N");
  for (const auto& [l, name] : {std::pair{a, "A"}, std::pair{b, "B"}, std::pair{c, "C"}, std::pair{d, "D"}})
    if (const cublasStatus_t s = check_layout(l, name); s != CUBLAS_STATUS_SUCCESS) return s;

  Problem p{};
  p.desc = desc;
  p.a = a;
  p.b = b;
  p.c = c;
  p.d = d;
  // For real types CUBLAS_OP_C is CUBLAS_OP_T.
  p.trans_a = dd.transa != CUBLAS_OP_N;
  p.trans_b = dd.transb != CUBLAS_OP_N;
  p.m = static_cast<int64_t>(d->rows);
  p.n = static_cast<int64_t>(d->cols);
  p.k = static_cast<int64_t>(p.trans_a ? a->rows : a->cols);
  const int64_t a_m = static_cast<int64_t>(p.trans_a ? a->cols : a->rows);
  const int64_t b_k = static_cast<int64_t>(p.trans_b ? b->cols : b->rows);
  const int64_t b_n = static_cast<int64_t>(p.trans_b ? b->rows : b->cols);
  if (a_m != p.m || b_k != p.k || b_n != p.n || c->rows != d->rows || c->cols != d->cols)
    return refuse(CUBLAS_STATUS_INVALID_VALUE,
                  fmt::format("shapes do not chain: op(A) {}x{}, op(B) {}x{}, C {}x{}, D {}x{}", a_m, p.k, b_k, b_n,
                              c->rows, c->cols, d->rows, d->cols));
  if (a->batch_count != d->batch_count || b->batch_count != d->batch_count || c->batch_count != d->batch_count)
    return refuse(CUBLAS_STATUS_INVALID_VALUE, "batch counts of A, B, C and D differ");
  p.batch = d->batch_count;
  p.fp8 = is_fp8(static_cast<int32_t>(a->type)) || is_fp8(static_cast<int32_t>(b->type));
  p.tf32 = dd.compute_type == CUBLAS_COMPUTE_32F_FAST_TF32;

  if (const cublasStatus_t s = check_types(p, dd); s != CUBLAS_STATUS_SUCCESS) return s;
  if (p.fp8) {
    if (!p.trans_a || p.trans_b)
      return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "FP8 needs A transposed and B not (TN, in column-major terms)");
    if (const cublasStatus_t s = check_fp8_alignment(p); s != CUBLAS_STATUS_SUCCESS) return s;
  } else if (dd.a_scale != nullptr || dd.b_scale != nullptr || dd.c_scale != nullptr || dd.amax_d != nullptr) {
    return refuse(CUBLAS_STATUS_INVALID_VALUE, "A/B/C scale pointers and D amax need FP8 A and B");
  }
  if (dd.d_scale != nullptr && !is_fp8(static_cast<int32_t>(d->type)))
    return refuse(CUBLAS_STATUS_INVALID_VALUE, "D_SCALE_POINTER needs an FP8 D");
  if (const cublasStatus_t s = check_epilogue(p, dd); s != CUBLAS_STATUS_SUCCESS) return s;
  *problem = p;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t check_pointers(const Problem& p, const void* alpha, const void* beta, const void* A, const void* B,
                              const void* C, const void* D) {
  if (alpha == nullptr || beta == nullptr) return refuse(CUBLAS_STATUS_INVALID_VALUE, "null alpha or beta");
  if (p.m == 0 || p.n == 0) return CUBLAS_STATUS_SUCCESS;
  if (D == nullptr || (p.k > 0 && (A == nullptr || B == nullptr)))
    return refuse(CUBLAS_STATUS_INVALID_VALUE, "null A, B or D");
  if (*static_cast<const float*>(beta) != 0.0f && C == nullptr)
    return refuse(CUBLAS_STATUS_INVALID_VALUE, "null C with beta != 0");
  const uint32_t e = p.desc->epilogue;
  if ((has_bias(e) || has_bias_gradient(e)) && p.desc->bias == nullptr)
    return refuse(CUBLAS_STATUS_INVALID_VALUE, fmt::format("epilogue {} needs BIAS_POINTER", e));
  if (has_aux(e) && p.desc->aux == nullptr)
    return refuse(CUBLAS_STATUS_INVALID_VALUE, fmt::format("epilogue {} needs EPILOGUE_AUX_POINTER", e));
  if (p.fp8) {
    for (const void* ptr : {A, B, C, static_cast<const void*>(D)})
      if (reinterpret_cast<uintptr_t>(ptr) % 16 != 0)
        return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "FP8: A, B, C and D must be 16-byte aligned");
  }
  return CUBLAS_STATUS_SUCCESS;
}

}  // namespace gpt::emu::cublaslt
