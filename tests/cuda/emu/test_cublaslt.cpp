// The emulated cuBLASLt against a triple loop in double precision: every type combination and transpose
// the backend uses, ld > rows, strided batches, alpha/beta, every epilogue, FP8 with per-tensor scales
// and D amax. Inputs are random and never zero; every output buffer (its padding included) is poisoned
// with NaN bytes first, so an element not written, or written outside its place, shows.
//
// Tolerance for an element: the FP32 accumulation of k exact products (BF16/F16/FP8 products are exact
// in FP32; F32 ones round once) is within (k + 4) u32 sum |a b| of the exact sum (u32 = 2^-24, four more
// roundings for the scales and C); GELU and its derivative, evaluated in float, add a few u32 of the
// value; the store adds one ulp of the output format.
#include "cublaslt_harness.h"

#include <algorithm>

namespace {

using namespace gpt::test::lt;

constexpr double kU32 = 0x1p-24;

double gelu(double x) { return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x))); }
double gelu_grad(double x) {
  const double s = std::sqrt(2.0 / M_PI), t = std::tanh(s * (x + 0.044715 * x * x * x));
  return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * s * (1.0 + 3.0 * 0.044715 * x * x);
}

bool bias_in(uint32_t e) {
  return e == CUBLASLT_EPILOGUE_BIAS || e == CUBLASLT_EPILOGUE_GELU_BIAS || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
}
bool gelu_out(uint32_t e) {
  return e == CUBLASLT_EPILOGUE_GELU || e == CUBLASLT_EPILOGUE_GELU_BIAS || e == CUBLASLT_EPILOGUE_GELU_AUX ||
         e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
}
bool aux_out(uint32_t e) { return e == CUBLASLT_EPILOGUE_GELU_AUX || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS; }
bool dgelu(uint32_t e) { return e == CUBLASLT_EPILOGUE_DGELU || e == CUBLASLT_EPILOGUE_DGELU_BGRAD; }
bool bgrad(uint32_t e) {
  return e == CUBLASLT_EPILOGUE_DGELU_BGRAD || e == CUBLASLT_EPILOGUE_BGRADA || e == CUBLASLT_EPILOGUE_BGRADB;
}
bool is_fp8(cudaDataType_t t) { return t == CUDA_R_8F_E4M3 || t == CUDA_R_8F_E5M2; }

struct Case {
  cudaDataType_t ta, tb, tc, td;
  int64_t m = 37, n = 23, k = 45;
  int32_t transa = CUBLAS_OP_N, transb = CUBLAS_OP_N;
  int64_t pad = 3, batch = 1;
  float alpha = 0.75f, beta = 0.0f;
  uint32_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  float sa = 1, sb = 1, sc = 1, sd = 1;  // FP8 scales; sd only with an FP8 D
  bool amax = false;
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
};

// Bias and aux take D's type, or for FP8 kernels the type the rules give (rules.cpp).
cudaDataType_t bias_type_of(const Case& c) {
  if (!is_fp8(c.ta)) return c.td;
  return c.tc == CUDA_R_32F ? CUDA_R_16BF : c.tc;
}
cudaDataType_t aux_type_of(const Case& c) { return c.td; }

std::string describe(const Case& c) {
  return fmt::format("types {} {} {} {} m {} n {} k {} trans {}{} batch {} beta {} epilogue {}", static_cast<int>(c.ta),
                     static_cast<int>(c.tb), static_cast<int>(c.tc), static_cast<int>(c.td), c.m, c.n, c.k, c.transa,
                     c.transb, c.batch, c.beta, c.epilogue);
}

// Bytes of the buffer outside the matrix elements (ld padding, batch gaps, the tail) must still be poison.
void expect_padding_untouched(Matrix& x, const std::string& what) {
  std::vector<bool> element(x.bytes.size(), false);
  const int64_t s = type_size(x.type);
  for (int64_t b = 0; b < x.batch; ++b)
    for (int64_t j = 0; j < x.cols; ++j)
      for (int64_t i = 0; i < x.rows; ++i)
        for (int64_t q = 0; q < s; ++q) element[static_cast<size_t>((b * x.stride + i + j * x.ld) * s + q)] = true;
  for (size_t i = 0; i < x.bytes.size(); ++i) {
    if (!element[i]) {
      ASSERT_EQ(x.bytes[i], 0xFF) << what << ": byte " << i << " outside the matrix was written";
    }
  }
}

void check_case(const Case& c, std::mt19937& rng) {
  SCOPED_TRACE(describe(c));
  const bool fp8 = is_fp8(c.ta);
  const double in_lo = fp8 ? 0.5 : 0.25, in_hi = fp8 ? 3.0 : 1.0;
  Matrix a(c.ta, c.transa == CUBLAS_OP_N ? c.m : c.k, c.transa == CUBLAS_OP_N ? c.k : c.m,
           (c.transa == CUBLAS_OP_N ? c.m : c.k) + c.pad, c.batch);
  Matrix b(c.tb, c.transb == CUBLAS_OP_N ? c.k : c.n, c.transb == CUBLAS_OP_N ? c.n : c.k,
           (c.transb == CUBLAS_OP_N ? c.k : c.n) + c.pad, c.batch);
  a.fill_random(rng, in_lo, in_hi);
  b.fill_random(rng, in_lo, in_hi);
  Matrix cm(c.tc, c.m, c.n, c.m + c.pad, c.batch);
  if (c.beta != 0.0f) cm.fill_random(rng, 0.25, 1.0);  // else left NaN: with beta 0 C is not read
  Matrix d(c.td, c.m, c.n, c.m + c.pad, c.batch);
  const uint32_t e = c.epilogue;
  const int64_t bias_len = e == CUBLASLT_EPILOGUE_BGRADB ? c.n : c.m;
  Matrix bias(bias_type_of(c), bias_len, 1, bias_len, c.batch, bias_len + 5);
  if (bias_in(e)) bias.fill_random(rng, 0.25, 1.0);
  const int64_t aux_ld = (c.m + 7) / 8 * 8 + 8;
  Matrix aux(aux_type_of(c), c.m, c.n, aux_ld, c.batch, aux_ld * c.n + 8);
  if (dgelu(e)) aux.fill_random(rng, 0.1, 2.0);

  Call call;
  call.compute = c.compute;
  call.transa = c.transa;
  call.transb = c.transb;
  call.alpha = c.alpha;
  call.beta = c.beta;
  call.epilogue = e;
  if (bias_in(e) || bgrad(e)) {
    call.bias = bias.data();
    if (c.batch > 1) call.bias_batch_stride = bias.stride;
  }
  if (aux_out(e) || dgelu(e)) {
    call.aux = aux.data();
    call.aux_ld = aux.ld;
    if (c.batch > 1) call.aux_batch_stride = aux.stride;
  }
  float amax = NAN;
  if (fp8) {
    call.a_scale = &c.sa;
    call.b_scale = &c.sb;
    call.c_scale = &c.sc;
    if (is_fp8(c.td)) call.d_scale = &c.sd;
    if (c.amax) call.amax_d = &amax;
  }
  const Statuses s = run(call, a, b, &cm, d);
  ASSERT_EQ(s.heuristic, CUBLAS_STATUS_SUCCESS) << s.why;
  ASSERT_EQ(s.matmul, CUBLAS_STATUS_SUCCESS) << s.why;
  expect_padding_untouched(d, "D");
  if (aux_out(e)) expect_padding_untouched(aux, "aux");

  const double sab = double(c.alpha) * (fp8 ? double(c.sa) * c.sb : 1.0);
  const double scb = double(c.beta) * (fp8 ? c.sc : 1.0);
  const double sd = is_fp8(c.td) ? c.sd : 1.0;
  double amax_ref = 0, amax_tol = 0;
  for (int64_t bt = 0; bt < c.batch; ++bt) {
    std::vector<double> row_sum(static_cast<size_t>(c.m), 0.0), row_tol(static_cast<size_t>(c.m), 0.0);
    for (int64_t j = 0; j < c.n; ++j)
      for (int64_t i = 0; i < c.m; ++i) {
        double t = 0, mag = 0;
        for (int64_t q = 0; q < c.k; ++q) {
          const double x = c.transa == CUBLAS_OP_N ? a.get(i, q, bt) : a.get(q, i, bt);
          const double y = c.transb == CUBLAS_OP_N ? b.get(q, j, bt) : b.get(j, q, bt);
          t += x * y;
          mag += std::fabs(x * y);
        }
        t *= sab;
        mag *= std::fabs(sab);
        if (c.beta != 0.0f) {
          t += scb * cm.get(i, j, bt);
          mag += std::fabs(scb * cm.get(i, j, bt));
        }
        double tol = (c.k + 4) * kU32 * mag;
        if (bias_in(e)) t += bias.get(i, 0, bt);
        if (aux_out(e)) {
          const double got = aux.get(i, j, bt);
          ASSERT_LE(std::fabs(got - t), tol + ulp(aux.type, std::fabs(t) + tol)) << "aux " << i << "," << j;
        }
        if (gelu_out(e)) {
          tol = 1.2 * tol + 8 * kU32 * (std::fabs(t) + 1);
          t = gelu(t);
        }
        if (dgelu(e)) {
          // gelu' is a sum of terms up to about 1 + x^2 in size that cancel near x = -0.75, so its float
          // evaluation errs by a few u32 absolutely, not relatively: the bound scales with the input t.
          const double x = aux.get(i, j, bt), g = gelu_grad(x);
          tol = tol * std::fabs(g) + 32 * kU32 * std::fabs(t) * (1 + x * x);
          t *= g;
        }
        row_sum[static_cast<size_t>(i)] += t;
        row_tol[static_cast<size_t>(i)] += tol + c.n * kU32 * std::fabs(t);
        amax_ref = std::max(amax_ref, std::fabs(t));
        amax_tol = std::max(amax_tol, tol);
        const double got = d.get(i, j, bt);
        ASSERT_TRUE(std::isfinite(got)) << "D " << i << "," << j << " batch " << bt;
        ASSERT_LE(std::fabs(got - sd * t), sd * tol + ulp(d.type, sd * (std::fabs(t) + tol)))
            << "D " << i << "," << j << " batch " << bt << " want " << sd * t;
      }
    if (e == CUBLASLT_EPILOGUE_DGELU_BGRAD)
      for (int64_t i = 0; i < c.m; ++i) {
        const double want = row_sum[static_cast<size_t>(i)];
        ASSERT_LE(std::fabs(bias.get(i, 0, bt) - want), row_tol[static_cast<size_t>(i)] + ulp(bias.type, std::fabs(want)))
            << "bias gradient " << i;
      }
    if (e == CUBLASLT_EPILOGUE_BGRADA || e == CUBLASLT_EPILOGUE_BGRADB) {
      const int64_t len = e == CUBLASLT_EPILOGUE_BGRADA ? c.m : c.n;
      for (int64_t v = 0; v < len; ++v) {
        double want = 0, mag = 0;
        for (int64_t q = 0; q < c.k; ++q) {
          const double x = e == CUBLASLT_EPILOGUE_BGRADA ? (c.transa == CUBLAS_OP_N ? a.get(v, q, bt) : a.get(q, v, bt))
                                                         : (c.transb == CUBLAS_OP_N ? b.get(q, v, bt) : b.get(v, q, bt));
          want += x;
          mag += std::fabs(x);
        }
        ASSERT_LE(std::fabs(bias.get(v, 0, bt) - want), c.k * kU32 * mag + ulp(bias.type, std::fabs(want)))
            << "bias gradient " << v;
      }
    }
  }
  if (c.amax) {
    EXPECT_LE(std::fabs(amax - amax_ref), amax_tol + 1e-30) << "amax (before the D scale) " << amax_ref;
  }
}

struct Types {
  cudaDataType_t a, b, c, d;
};
const Types kFloatTypes[] = {{CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, CUDA_R_32F},
                             {CUDA_R_16BF, CUDA_R_16BF, CUDA_R_16BF, CUDA_R_16BF},
                             {CUDA_R_16F, CUDA_R_16F, CUDA_R_16F, CUDA_R_16F},
                             {CUDA_R_16BF, CUDA_R_16BF, CUDA_R_32F, CUDA_R_32F},
                             {CUDA_R_16F, CUDA_R_16F, CUDA_R_32F, CUDA_R_32F}};

TEST(CublasLt, EveryTypeTransposeAndBetaAgainstDouble) {
  std::mt19937 rng(1);
  for (const Types& t : kFloatTypes)
    for (int32_t ta : {CUBLAS_OP_N, CUBLAS_OP_T})
      for (int32_t tb : {CUBLAS_OP_N, CUBLAS_OP_T, CUBLAS_OP_C})
        for (float beta : {0.0f, 0.5f}) {
          Case c{t.a, t.b, t.c, t.d};
          c.transa = ta;
          c.transb = tb;
          c.beta = beta;
          check_case(c, rng);
        }
}

TEST(CublasLt, StridedBatches) {
  std::mt19937 rng(2);
  for (uint32_t e : {CUBLASLT_EPILOGUE_DEFAULT, CUBLASLT_EPILOGUE_GELU_AUX_BIAS, CUBLASLT_EPILOGUE_DGELU_BGRAD}) {
    Case c{CUDA_R_16BF, CUDA_R_16BF, CUDA_R_16BF, CUDA_R_16BF};
    c.batch = 3;
    c.transa = CUBLAS_OP_T;
    c.beta = 0.25f;
    c.epilogue = e;
    check_case(c, rng);
  }
}

TEST(CublasLt, EveryEpilogue) {
  std::mt19937 rng(3);
  for (const Types& t : {kFloatTypes[0], kFloatTypes[1], kFloatTypes[2]})
    for (uint32_t e : {CUBLASLT_EPILOGUE_BIAS, CUBLASLT_EPILOGUE_GELU, CUBLASLT_EPILOGUE_GELU_BIAS,
                       CUBLASLT_EPILOGUE_GELU_AUX, CUBLASLT_EPILOGUE_GELU_AUX_BIAS, CUBLASLT_EPILOGUE_DGELU,
                       CUBLASLT_EPILOGUE_DGELU_BGRAD, CUBLASLT_EPILOGUE_BGRADA, CUBLASLT_EPILOGUE_BGRADB})
      for (int32_t tb : {CUBLAS_OP_N, CUBLAS_OP_T}) {
        Case c{t.a, t.b, t.c, t.d};
        c.transa = CUBLAS_OP_T;
        c.transb = tb;
        c.epilogue = e;
        c.beta = e == CUBLASLT_EPILOGUE_BGRADB ? 0.0f : 0.5f;
        check_case(c, rng);
      }
}

TEST(CublasLt, Fp8WithScalesAndAmax) {
  std::mt19937 rng(4);
  const Types fp8_types[] = {{CUDA_R_8F_E4M3, CUDA_R_8F_E4M3, CUDA_R_16BF, CUDA_R_16BF},
                             {CUDA_R_8F_E4M3, CUDA_R_8F_E4M3, CUDA_R_32F, CUDA_R_32F},
                             {CUDA_R_8F_E4M3, CUDA_R_8F_E4M3, CUDA_R_16BF, CUDA_R_8F_E4M3},
                             {CUDA_R_8F_E4M3, CUDA_R_8F_E4M3, CUDA_R_16F, CUDA_R_8F_E4M3},
                             {CUDA_R_8F_E4M3, CUDA_R_8F_E5M2, CUDA_R_16BF, CUDA_R_8F_E5M2},
                             {CUDA_R_8F_E5M2, CUDA_R_8F_E4M3, CUDA_R_16F, CUDA_R_16F}};
  for (const Types& t : fp8_types)
    for (uint32_t e : {CUBLASLT_EPILOGUE_DEFAULT, CUBLASLT_EPILOGUE_GELU_BIAS, CUBLASLT_EPILOGUE_GELU_AUX_BIAS})
      for (float beta : {0.0f, 0.5f}) {
        if (e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS && is_fp8(t.d)) continue;  // refused (test_cublaslt_refusals)
        Case c{t.a, t.b, t.c, t.d};
        // TN, k and the leading dimensions multiples of 16 elements, n free.
        c.m = 32, c.n = 21, c.k = 48, c.pad = 16;
        c.transa = CUBLAS_OP_T;
        c.alpha = 1.5f;
        c.beta = beta;
        c.epilogue = e;
        c.sa = 0.5f, c.sb = 0.25f, c.sc = 2.0f;
        c.sd = 0.125f;
        c.amax = true;
        check_case(c, rng);
      }
}

// cvt.rn.tf32.f32 keeps 10 mantissa bits, rounding to nearest even; a plain bit-level rounding here.
float tf32(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  u = (u + 0xFFFu + ((u >> 13) & 1u)) & ~0x1FFFu;
  std::memcpy(&x, &u, 4);
  return x;
}

TEST(CublasLt, FastTf32RoundsTheInputsOnly) {
  std::mt19937 rng(5);
  const int64_t m = 19, n = 11, k = 33;
  Matrix a(CUDA_R_32F, m, k, m), b(CUDA_R_32F, k, n, k), d(CUDA_R_32F, m, n, m);
  a.fill_random(rng, 0.25, 1.0);
  b.fill_random(rng, 0.25, 1.0);
  Call call;
  call.compute = CUBLAS_COMPUTE_32F_FAST_TF32;
  const Statuses s = run(call, a, b, nullptr, d);
  ASSERT_EQ(s.matmul, CUBLAS_STATUS_SUCCESS) << s.why;
  int differs = 0;
  for (int64_t j = 0; j < n; ++j)
    for (int64_t i = 0; i < m; ++i) {
      double want = 0, full = 0, mag = 0;
      for (int64_t q = 0; q < k; ++q) {
        want += double(tf32(float(a.get(i, q)))) * tf32(float(b.get(q, j)));
        full += a.get(i, q) * b.get(q, j);
        mag += std::fabs(a.get(i, q) * b.get(q, j));
      }
      ASSERT_LE(std::fabs(d.get(i, j) - want), (k + 2) * kU32 * mag);
      differs += std::fabs(d.get(i, j) - full) > (k + 2) * kU32 * mag;
    }
  EXPECT_GT(differs, 0) << "TF32 rounding of the inputs had no effect";
}

TEST(CublasLt, DevicePointerModeAndInPlaceC) {
  std::mt19937 rng(6);
  const int64_t m = 13, n = 9, k = 7;
  Matrix a(CUDA_R_16BF, m, k, m), b(CUDA_R_16BF, k, n, k), d(CUDA_R_16BF, m, n, m + 2);
  a.fill_random(rng, 0.25, 1.0);
  b.fill_random(rng, 0.25, 1.0);
  d.fill_random(rng, 0.25, 1.0);
  const Matrix c0 = d;
  Call call;
  call.pointer_mode = CUBLASLT_POINTER_MODE_DEVICE;  // alpha and beta read from (emulated) device memory
  call.alpha = 2.0f;
  call.beta = 1.0f;
  const Statuses s = run(call, a, b, nullptr, d);  // C is D: accumulate in place
  ASSERT_EQ(s.matmul, CUBLAS_STATUS_SUCCESS) << s.why;
  for (int64_t j = 0; j < n; ++j)
    for (int64_t i = 0; i < m; ++i) {
      double want = c0.get(i, j), mag = std::fabs(want);
      for (int64_t q = 0; q < k; ++q) {
        want += 2.0 * a.get(i, q) * b.get(q, j);
        mag += std::fabs(2.0 * a.get(i, q) * b.get(q, j));
      }
      ASSERT_LE(std::fabs(d.get(i, j) - want), (k + 4) * kU32 * mag + ulp(CUDA_R_16BF, std::fabs(want)));
    }
}

TEST(CublasLt, Fp8OutputSaturatesAndAmaxIsBeforeTheScale) {
  std::mt19937 rng(7);
  Matrix a(CUDA_R_8F_E4M3, 32, 16, 32), b(CUDA_R_8F_E4M3, 32, 16, 32), c(CUDA_R_16BF, 16, 16, 16),
      d(CUDA_R_8F_E4M3, 16, 16, 16);
  a.fill_random(rng, 1.0, 2.0);
  b.fill_random(rng, 1.0, 2.0);
  Call call;
  call.transa = CUBLAS_OP_T;
  const float sd = 1e6f;
  float amax = -1;
  call.d_scale = &sd;
  call.amax_d = &amax;
  ASSERT_EQ(run(call, a, b, &c, d).matmul, CUBLAS_STATUS_SUCCESS);
  double amax_ref = 0;
  for (int64_t j = 0; j < 16; ++j)
    for (int64_t i = 0; i < 16; ++i) {
      double t = 0;
      for (int64_t q = 0; q < 32; ++q) t += a.get(q, i) * b.get(q, j);
      amax_ref = std::max(amax_ref, std::fabs(t));
      ASSERT_EQ(d.get(i, j), t > 0 ? 448.0 : -448.0);
    }
  EXPECT_LE(std::fabs(amax - amax_ref), 36 * kU32 * amax_ref);
}

}  // namespace
