// Helpers for the emulated-cuBLASLt tests: matrices of any emulated type in cuBLASLt's column-major
// layout (random values, never zero, or poisoned with NaN bytes), one call that sets every attribute a
// test asks for and runs the heuristic and the product, and the per-format rounding unit.
#pragma once

#include "common/cuda_check.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace gpt::test::lt {

inline int64_t type_size(cudaDataType_t t) {
  return t == CUDA_R_32F ? 4 : (t == CUDA_R_16F || t == CUDA_R_16BF) ? 2 : 1;
}

inline double decode(cudaDataType_t t, const uint8_t* p) {
  uint16_t u16;
  switch (t) {
    case CUDA_R_32F: {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
    case CUDA_R_16F: std::memcpy(&u16, p, 2); return F16Format::decode(u16);
    case CUDA_R_16BF: std::memcpy(&u16, p, 2); return Bf16Format::decode(u16);
    case CUDA_R_8F_E4M3: return E4m3Format::decode(*p);
    case CUDA_R_8F_E5M2: return E5m2Format::decode(*p);
    default: return NAN;
  }
}

inline void encode(cudaDataType_t t, uint8_t* p, double v) {
  uint16_t u16;
  switch (t) {
    case CUDA_R_32F: {
      const float f = static_cast<float>(v);
      std::memcpy(p, &f, 4);
      break;
    }
    case CUDA_R_16F: u16 = F16Format::encode(v); std::memcpy(p, &u16, 2); break;
    case CUDA_R_16BF: u16 = Bf16Format::encode(v); std::memcpy(p, &u16, 2); break;
    case CUDA_R_8F_E4M3: *p = E4m3Format::encode(v); break;
    case CUDA_R_8F_E5M2: *p = E5m2Format::encode(v); break;
    default: break;
  }
}

// One unit in the last place of the format at |x| (subnormal spacing below the smallest normal).
inline double ulp(cudaDataType_t t, double x) {
  int man = 23, emin = -126;
  if (t == CUDA_R_16BF) man = 7;
  if (t == CUDA_R_16F) man = 10, emin = -14;
  if (t == CUDA_R_8F_E4M3) man = 3, emin = -6;
  if (t == CUDA_R_8F_E5M2) man = 2, emin = -14;
  const int e = x == 0 ? emin : std::max(static_cast<int>(std::floor(std::log2(std::fabs(x)))), emin);
  return std::ldexp(1.0, e - man);
}

// A column-major matrix (or strided batch of them) of cuBLASLt's layout, owning its bytes. Every byte
// of the buffer is covered: padding rows (ld > rows) and gaps between batches hold poison too.
struct Matrix {
  cudaDataType_t type;
  int64_t rows, cols, ld, batch, stride;
  std::vector<uint8_t> bytes;

  Matrix(cudaDataType_t t, int64_t r, int64_t c, int64_t ld_, int64_t batch_ = 1, int64_t stride_ = 0)
      : type(t), rows(r), cols(c), ld(ld_), batch(batch_), stride(stride_ ? stride_ : ld_ * c) {
    bytes.assign(static_cast<size_t>((stride * (batch - 1) + ld * cols) * type_size(t)) + 16, 0xFF);
  }
  uint8_t* at(int64_t i, int64_t j, int64_t b = 0) {
    return bytes.data() + (b * stride + i + j * ld) * type_size(type);
  }
  double get(int64_t i, int64_t j, int64_t b = 0) const {
    return decode(type, bytes.data() + (b * stride + i + j * ld) * type_size(type));
  }
  void set(int64_t i, int64_t j, int64_t b, double v) { encode(type, at(i, j, b), v); }
  void fill_random(std::mt19937& rng, double lo, double hi) {
    std::uniform_real_distribution<double> u(lo, hi);
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t j = 0; j < cols; ++j)
        for (int64_t i = 0; i < rows; ++i) set(i, j, b, (rng() & 1 ? -1 : 1) * u(rng));
  }
  void* data() { return bytes.data(); }
};

// Everything a test may set on the descriptors; unset pointers stay at cuBLASLt's defaults.
struct Call {
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  cudaDataType_t scale_type = CUDA_R_32F;
  int32_t transa = CUBLAS_OP_N, transb = CUBLAS_OP_N, transc = CUBLAS_OP_N;
  uint32_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  int32_t pointer_mode = CUBLASLT_POINTER_MODE_HOST;
  const void* bias = nullptr;
  int64_t bias_batch_stride = 0;
  int32_t bias_type = -1;
  void* aux = nullptr;
  int64_t aux_ld = 0, aux_batch_stride = 0;
  int32_t aux_type = -1;
  const float *a_scale = nullptr, *b_scale = nullptr, *c_scale = nullptr, *d_scale = nullptr;
  float* amax_d = nullptr;
  int8_t fast_accum = 0;
  float alpha = 1.0f, beta = 0.0f;
  int32_t order = CUBLASLT_ORDER_COL;
  int requested_algos = 1;
};

struct Statuses {
  cublasStatus_t heuristic, matmul;
  std::string why;  // cublaslt_last_refusal() right after the product (the destroy calls clear it)
};

inline cublasLtMatrixLayout_t layout_of(const Matrix& m, int32_t order) {
  cublasLtMatrixLayout_t l;
  EXPECT_EQ(cublasLtMatrixLayoutCreate(&l, m.type, static_cast<uint64_t>(m.rows), static_cast<uint64_t>(m.cols), m.ld),
            CUBLAS_STATUS_SUCCESS);
  const int32_t batch = static_cast<int32_t>(m.batch);
  EXPECT_EQ(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof batch),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &m.stride, sizeof m.stride),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_ORDER, &order, sizeof order), CUBLAS_STATUS_SUCCESS);
  return l;
}

template <class T>
void set_attr(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t a, const T& v) {
  ASSERT_EQ(cublasLtMatmulDescSetAttribute(d, a, &v, sizeof v), CUBLAS_STATUS_SUCCESS) << "attribute " << a;
}

// Runs the heuristic and then (whatever the heuristic said) the product; C is D when c is null.
inline Statuses run(const Call& call, Matrix& a, Matrix& b, Matrix* c, Matrix& d) {
  cublasLtHandle_t h;
  EXPECT_EQ(cublasLtCreate(&h), CUBLAS_STATUS_SUCCESS);
  cublasLtMatmulDesc_t desc;
  EXPECT_EQ(cublasLtMatmulDescCreate(&desc, call.compute, call.scale_type), CUBLAS_STATUS_SUCCESS);
  set_attr(desc, CUBLASLT_MATMUL_DESC_TRANSA, call.transa);
  set_attr(desc, CUBLASLT_MATMUL_DESC_TRANSB, call.transb);
  if (call.transc != CUBLAS_OP_N) set_attr(desc, CUBLASLT_MATMUL_DESC_TRANSC, call.transc);
  set_attr(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, call.epilogue);
  set_attr(desc, CUBLASLT_MATMUL_DESC_POINTER_MODE, call.pointer_mode);
  if (call.bias) set_attr(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, call.bias);
  if (call.bias_batch_stride) set_attr(desc, CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE, call.bias_batch_stride);
  if (call.bias_type != -1) set_attr(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, call.bias_type);
  if (call.aux) set_attr(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, call.aux);
  if (call.aux_ld) set_attr(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, call.aux_ld);
  if (call.aux_batch_stride) set_attr(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE, call.aux_batch_stride);
  if (call.aux_type != -1) set_attr(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE, call.aux_type);
  if (call.a_scale) set_attr(desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, call.a_scale);
  if (call.b_scale) set_attr(desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, call.b_scale);
  if (call.c_scale) set_attr(desc, CUBLASLT_MATMUL_DESC_C_SCALE_POINTER, call.c_scale);
  if (call.d_scale) set_attr(desc, CUBLASLT_MATMUL_DESC_D_SCALE_POINTER, call.d_scale);
  if (call.amax_d) set_attr(desc, CUBLASLT_MATMUL_DESC_AMAX_D_POINTER, call.amax_d);
  if (call.fast_accum) set_attr(desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM, call.fast_accum);
  Matrix& cm = c ? *c : d;
  cublasLtMatrixLayout_t la = layout_of(a, call.order), lb = layout_of(b, call.order), lc = layout_of(cm, call.order),
                         ld = layout_of(d, call.order);
  cublasLtMatmulPreference_t pref;
  EXPECT_EQ(cublasLtMatmulPreferenceCreate(&pref), CUBLAS_STATUS_SUCCESS);
  const uint64_t workspace = 32u << 20;
  EXPECT_EQ(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
                                                 sizeof workspace),
            CUBLAS_STATUS_SUCCESS);
  cublasLtMatmulHeuristicResult_t result{};
  int count = -1;
  Statuses s;
  s.heuristic = cublasLtMatmulAlgoGetHeuristic(h, desc, la, lb, lc, ld, pref, call.requested_algos, &result, &count);
  if (s.heuristic == CUBLAS_STATUS_SUCCESS) {
    EXPECT_EQ(count, 1);
    EXPECT_EQ(result.state, CUBLAS_STATUS_SUCCESS);
    EXPECT_LE(result.workspaceSize, workspace);
  } else {
    EXPECT_EQ(count <= 0, true);
  }
  s.matmul = cublasLtMatmul(h, desc, &call.alpha, a.data(), la, b.data(), lb, &call.beta, cm.data(), lc, d.data(), ld,
                            s.heuristic == CUBLAS_STATUS_SUCCESS ? &result.algo : nullptr, nullptr, 0, nullptr);
  s.why = gpt::emu::cublaslt_last_refusal();
  for (auto l : {la, lb, lc, ld}) EXPECT_EQ(cublasLtMatrixLayoutDestroy(l), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasLtMatmulPreferenceDestroy(pref), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasLtMatmulDescDestroy(desc), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasLtDestroy(h), CUBLAS_STATUS_SUCCESS);
  return s;
}

}  // namespace gpt::test::lt
