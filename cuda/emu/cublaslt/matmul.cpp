// The emulated product and its epilogues (cuBLAS docs, "cublasLtMatmul()" and cublasLtEpilogue_t in
// cublasLt.h), for one checked problem, per batch b:
//
//   T    = alpha * sA * sB * op(A) op(B) + beta * sC * C      FP32 accumulation, C read only if beta != 0
//   T   += bias (broadcast over columns)                      BIAS, GELU_BIAS, GELU_AUX_BIAS
//   Aux  = T;  T = gelu(T)                                    GELU_AUX*, GELU* without the Aux store
//   T    = T * gelu'(Aux)                                     DGELU, DGELU_BGRAD
//   bias = row sums of T                                      DGELU_BGRAD (length m)
//   bias = row sums of op(A) / column sums of op(B)           BGRADA (length m) / BGRADB (length n)
//   amax = max |T| over every batch                           AMAX_D_POINTER, before the D scale
//   D    = convert(sD * T)                                    RNE; FP8 saturates to +-max
//
// sA, sB, sC, sD are the FP8 per-tensor scales (1 when unset); gelu is the tanh approximation
// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), as cublasLt.h's GELU epilogues compute it. The
// order in which a GPU accumulates the k products (and FP8 FAST_ACCUM's lower-precision accumulation)
// is unspecified, so results match a GPU to a tolerance, not bitwise.
#include "emu/cublaslt/descriptors.h"
#include "emu/formats.h"
#include "emu/internal.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace gpt::emu::cublaslt {
namespace {

float load(cudaDataType_t t, const void* base, int64_t i) {
  switch (t) {
    case CUDA_R_32F: return static_cast<const float*>(base)[i];
    case CUDA_R_16F: return F16Format::decode(static_cast<const uint16_t*>(base)[i]);
    case CUDA_R_16BF: return Bf16Format::decode(static_cast<const uint16_t*>(base)[i]);
    case CUDA_R_8F_E4M3: return E4m3Format::decode(static_cast<const uint8_t*>(base)[i]);
    case CUDA_R_8F_E5M2: return E5m2Format::decode(static_cast<const uint8_t*>(base)[i]);
    default: return std::nanf("");
  }
}

void store(cudaDataType_t t, void* base, int64_t i, float v) {
  switch (t) {
    case CUDA_R_32F: static_cast<float*>(base)[i] = v; break;
    case CUDA_R_16F: static_cast<uint16_t*>(base)[i] = F16Format::encode(v); break;
    case CUDA_R_16BF: static_cast<uint16_t*>(base)[i] = Bf16Format::encode(v); break;
    case CUDA_R_8F_E4M3: static_cast<uint8_t*>(base)[i] = E4m3Format::encode(v, true); break;
    case CUDA_R_8F_E5M2: static_cast<uint8_t*>(base)[i] = E5m2Format::encode(v, true); break;
    default: break;
  }
}

int64_t type_size(cudaDataType_t t) {
  return t == CUDA_R_32F ? 4 : (t == CUDA_R_16F || t == CUDA_R_16BF) ? 2 : 1;
}

const void* offset(const void* base, cudaDataType_t t, int64_t elements) {
  return static_cast<const char*>(base) + elements * type_size(t);
}
void* offset(void* base, cudaDataType_t t, int64_t elements) {
  return static_cast<char*>(base) + elements * type_size(t);
}

// TF32 keeps FP32's exponent and 10 mantissa bits; the rounding of the tensor cores' input conversion is
// not documented, so round to nearest even (cvt.rn.tf32.f32).
float to_tf32(float x) {
  return f32_from_bits(gpt::detail::round_to_format<8, 10, true, gpt::detail::F32Layout>(f32_bits(x), false) << 13);
}

constexpr float kGeluScale = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float kGeluCubic = 0.044715f;

float gelu(float x) { return 0.5f * x * (1.0f + std::tanh(kGeluScale * (x + kGeluCubic * x * x * x))); }

float gelu_grad(float x) {
  const float t = std::tanh(kGeluScale * (x + kGeluCubic * x * x * x));
  return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * kGeluScale * (1.0f + 3.0f * kGeluCubic * x * x);
}

float scale_or_one(const void* p) { return p == nullptr ? 1.0f : *static_cast<const float*>(p); }

// The k-sum of one output element in FP32, as kLanes interleaved partial sums added pairwise at the end:
// a fixed order (so results are reproducible) that the compiler can vectorise, where one running sum
// cannot be reordered. A GPU's order is unspecified anyway (cublaslt.h).
constexpr int kLanes = 16;
float dot(const float* x, const float* y, int64_t k) {
  float lane[kLanes] = {};
  int64_t q = 0;
  for (; q + kLanes <= k; q += kLanes)
    for (int l = 0; l < kLanes; ++l) lane[l] += x[q + l] * y[q + l];
  for (int l = 0; q < k; ++q, ++l) lane[l] += x[q] * y[q];
  for (int width = kLanes / 2; width > 0; width /= 2)
    for (int l = 0; l < width; ++l) lane[l] += lane[l + width];
  return lane[0];
}

}  // namespace

void run_matmul(const Problem& p, float alpha, float beta, const void* A, const void* B, const void* C, void* D) {
  const auto& d = *p.desc;
  const auto ta = static_cast<cudaDataType_t>(p.a->type), tb = static_cast<cudaDataType_t>(p.b->type);
  const auto tc = static_cast<cudaDataType_t>(p.c->type), td = static_cast<cudaDataType_t>(p.d->type);
  const int64_t m = p.m, n = p.n, k = p.k;
  const float scale_ab = p.fp8 ? alpha * scale_or_one(d.a_scale) * scale_or_one(d.b_scale) : alpha;
  const float scale_c = p.fp8 ? beta * scale_or_one(d.c_scale) : beta;
  const float scale_d = scale_or_one(d.d_scale);
  const uint32_t e = d.epilogue;
  const bool bias_in = e == CUBLASLT_EPILOGUE_BIAS || e == CUBLASLT_EPILOGUE_GELU_BIAS ||
                       e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
  const bool gelu_out = e == CUBLASLT_EPILOGUE_GELU || e == CUBLASLT_EPILOGUE_GELU_BIAS ||
                        e == CUBLASLT_EPILOGUE_GELU_AUX || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
  const bool aux_out = e == CUBLASLT_EPILOGUE_GELU_AUX || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
  const bool dgelu = e == CUBLASLT_EPILOGUE_DGELU || e == CUBLASLT_EPILOGUE_DGELU_BGRAD;
  float amax = 0.0f;

  // op(A) as m x k rows and op(B) as n x k rows, so each dot product walks contiguous memory.
  std::vector<float> opa(static_cast<size_t>(m * k)), opb(static_cast<size_t>(n * k)), t(static_cast<size_t>(m * n));
  for (int64_t batch = 0; batch < p.batch; ++batch) {
    const void* a = offset(A, ta, batch * p.a->batch_stride);
    const void* b = offset(B, tb, batch * p.b->batch_stride);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t q = 0; q < k; ++q) {
        const float v = load(ta, a, p.trans_a ? q + i * p.a->ld : i + q * p.a->ld);
        opa[static_cast<size_t>(i * k + q)] = p.tf32 ? to_tf32(v) : v;
      }
    for (int64_t j = 0; j < n; ++j)
      for (int64_t q = 0; q < k; ++q) {
        const float v = load(tb, b, p.trans_b ? j + q * p.b->ld : q + j * p.b->ld);
        opb[static_cast<size_t>(j * k + q)] = p.tf32 ? to_tf32(v) : v;
      }

#pragma omp parallel for schedule(static)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t i = 0; i < m; ++i) {
        t[static_cast<size_t>(i + j * m)] = dot(&opa[static_cast<size_t>(i * k)], &opb[static_cast<size_t>(j * k)], k);
      }

    // The epilogue, in one thread: it is O(m n) against the product's O(m n k), and the bias gradients'
    // sums stay in a fixed order.
    const void* c = beta != 0.0f ? offset(C, tc, batch * p.c->batch_stride) : nullptr;
    void* dst = offset(D, td, batch * p.d->batch_stride);
    void* aux = d.aux == nullptr ? nullptr : offset(d.aux, p.aux_type, batch * d.aux_batch_stride);
    const void* bias_vec = d.bias == nullptr ? nullptr : offset(d.bias, p.bias_type, batch * d.bias_batch_stride);
    std::vector<float> row_sum(e == CUBLASLT_EPILOGUE_DGELU_BGRAD ? static_cast<size_t>(m) : 0, 0.0f);
    for (int64_t j = 0; j < n; ++j)
      for (int64_t i = 0; i < m; ++i) {
        float v = scale_ab * t[static_cast<size_t>(i + j * m)];
        if (c != nullptr) v += scale_c * load(tc, c, i + j * p.c->ld);
        if (bias_in) v += load(p.bias_type, bias_vec, i);
        if (aux_out) store(p.aux_type, aux, i + j * d.aux_ld, v);
        if (gelu_out) v = gelu(v);
        if (dgelu) v *= gelu_grad(load(p.aux_type, aux, i + j * d.aux_ld));
        if (!row_sum.empty()) row_sum[static_cast<size_t>(i)] += v;
        amax = std::max(amax, std::fabs(v));
        store(td, dst, i + j * p.d->ld, scale_d * v);
      }
    void* grad = const_cast<void*>(bias_vec);
    if (e == CUBLASLT_EPILOGUE_DGELU_BGRAD)
      for (int64_t i = 0; i < m; ++i) store(p.bias_type, grad, i, row_sum[static_cast<size_t>(i)]);
    if (e == CUBLASLT_EPILOGUE_BGRADA)
      for (int64_t i = 0; i < m; ++i) {
        float s = 0.0f;
        for (int64_t q = 0; q < k; ++q) s += opa[static_cast<size_t>(i * k + q)];
        store(p.bias_type, grad, i, s);
      }
    if (e == CUBLASLT_EPILOGUE_BGRADB)
      for (int64_t j = 0; j < n; ++j) {
        float s = 0.0f;
        for (int64_t q = 0; q < k; ++q) s += opb[static_cast<size_t>(j * k + q)];
        store(p.bias_type, grad, j, s);
      }
  }
  if (d.amax_d != nullptr) *static_cast<float*>(d.amax_d) = amax;
}

}  // namespace gpt::emu::cublaslt

using gpt::emu::cublaslt::Problem;
using gpt::emu::cublaslt::refuse;

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
                                              cublasLtMatrixLayout_t a_desc, cublasLtMatrixLayout_t b_desc,
                                              cublasLtMatrixLayout_t c_desc, cublasLtMatrixLayout_t d_desc,
                                              cublasLtMatmulPreference_t pref, int requested_count,
                                              cublasLtMatmulHeuristicResult_t results[], int* returned_count) {
  if (handle == nullptr || handle->magic != gpt::emu::cublaslt::kHandleMagic)
    return refuse(CUBLAS_STATUS_NOT_INITIALIZED, "cublasLtMatmulAlgoGetHeuristic: not a handle from cublasLtCreate");
  if (requested_count <= 0 || results == nullptr || returned_count == nullptr || pref == nullptr)
    return refuse(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmulAlgoGetHeuristic: bad result array or count");
  *returned_count = 0;
  Problem p;
  if (const cublasStatus_t s = gpt::emu::cublaslt::check_problem(desc, a_desc, b_desc, c_desc, d_desc, &p);
      s != CUBLAS_STATUS_SUCCESS)
    return s;
  // One algorithm, the emulator's loop, which needs no workspace. It keeps the pointer alignments the
  // preference let it assume, which cublasLtMatmul then checks.
  results[0] = cublasLtMatmulHeuristicResult_t{};
  results[0].algo.data[0] = gpt::emu::cublaslt::kHandleMagic;
  results[0].algo.data[1] = pref->min_alignment_a;
  results[0].algo.data[2] = pref->min_alignment_b;
  results[0].algo.data[3] = pref->min_alignment_c;
  results[0].algo.data[4] = pref->min_alignment_d;
  results[0].workspaceSize = 0;
  results[0].state = CUBLAS_STATUS_SUCCESS;
  results[0].wavesCount = 1.0f;
  *returned_count = 1;
  gpt::emu::cublaslt::clear_refusal();
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void* alpha, const void* A,
                              cublasLtMatrixLayout_t a_desc, const void* B, cublasLtMatrixLayout_t b_desc,
                              const void* beta, const void* C, cublasLtMatrixLayout_t c_desc, void* D,
                              cublasLtMatrixLayout_t d_desc, const cublasLtMatmulAlgo_t* algo, void* workspace,
                              size_t workspace_size, cudaStream_t stream) {
  (void)workspace;
  (void)workspace_size;
  if (handle == nullptr || handle->magic != gpt::emu::cublaslt::kHandleMagic)
    return refuse(CUBLAS_STATUS_NOT_INITIALIZED, "cublasLtMatmul: not a handle from cublasLtCreate");
  if (algo != nullptr && algo->data[0] != gpt::emu::cublaslt::kHandleMagic)
    return refuse(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmul: algo is not from cublasLtMatmulAlgoGetHeuristic");
  Problem p;
  if (const cublasStatus_t s = gpt::emu::cublaslt::check_problem(desc, a_desc, b_desc, c_desc, d_desc, &p);
      s != CUBLAS_STATUS_SUCCESS)
    return s;
  if (const cublasStatus_t s = gpt::emu::cublaslt::check_pointers(p, alpha, beta, A, B, C, D);
      s != CUBLAS_STATUS_SUCCESS)
    return s;
  // The emulated algorithm loads 16 bytes at a time wherever its preference let it assume that much
  // alignment (cuBLASLt's kernels need their alignment too: a pointer less aligned than the preference
  // said may be refused or fault; the status is the emulator's choice).
  if (algo != nullptr) {
    const struct {
      const void* ptr;
      uint64_t assumed;
      const char* name;
    } operands[] = {{A, algo->data[1], "A"}, {B, algo->data[2], "B"}, {C, algo->data[3], "C"}, {D, algo->data[4], "D"}};
    for (const auto& o : operands) {
      const uint64_t needed = std::min<uint64_t>(o.assumed, 16);
      if (o.ptr != nullptr && needed > 1 && reinterpret_cast<uintptr_t>(o.ptr) % needed != 0)
        return refuse(CUBLAS_STATUS_NOT_SUPPORTED,
                      fmt::format("cublasLtMatmul: {} at {} is not {}-byte aligned, which the heuristic assumed "
                                  "(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_{}_BYTES is {})",
                                  o.name, o.ptr, needed, o.name, o.assumed));
    }
  }
  // The product runs in stream order: after the work queued before it (a kernel that writes an operand,
  // or the FP8 scales and device-side alpha it reads), before the work queued after it. Waiting for the
  // earlier work and computing on the calling thread is one valid schedule of the asynchronous call.
  if (const cudaError_t e = gpt::cuda::emu::detail::enqueue(stream, [] {}); e != cudaSuccess)
    return refuse(CUBLAS_STATUS_EXECUTION_FAILED, fmt::format("cublasLtMatmul: stream: {}", cudaGetErrorString(e)));
  if (const cudaError_t e = gpt::cuda::emu::detail::synchronize_stream(stream); e != cudaSuccess)
    return refuse(CUBLAS_STATUS_EXECUTION_FAILED,
                  fmt::format("cublasLtMatmul: earlier work on the stream failed: {}", cudaGetErrorString(e)));
  if (p.m > 0 && p.n > 0)
    gpt::emu::cublaslt::run_matmul(p, *static_cast<const float*>(alpha), *static_cast<const float*>(beta), A, B, C, D);
  gpt::emu::cublaslt::clear_refusal();
  return CUBLAS_STATUS_SUCCESS;
}
