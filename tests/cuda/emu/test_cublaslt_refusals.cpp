// What the emulated cuBLASLt refuses, each with the status cuBLASLt returns (the list and its sources are
// in cuda/emu/cublaslt/rules.cpp), from the heuristic and from the product alike, with D left untouched;
// and the descriptor attribute calls' own errors.
#include "cublaslt_harness.h"

#include <cstdlib>
#include <functional>
#include <string>

namespace {

using namespace gpt::test::lt;

struct Refusal {
  const char* what;
  cublasStatus_t status;
  // Builds the operands (all valid FP8 TN, 32 x 16 x 32, unless the case changes them) and the call.
  std::function<void(cudaDataType_t& ta, cudaDataType_t& tb, cudaDataType_t& tc, cudaDataType_t& td, int64_t& m,
                     int64_t& n, int64_t& k, int64_t& lda, Call& call)>
      change;
};

const float kScale = 0.5f;
float amax_sink = 0;
alignas(16) uint8_t vector_sink[256];  // a bias or aux buffer that the refused calls must never touch

const Refusal kRefusals[] = {
    {"FP8 NN", CUBLAS_STATUS_NOT_SUPPORTED, [](auto&, auto&, auto&, auto&, auto&, auto&, auto&, auto&, Call& c) { c.transa = CUBLAS_OP_N; }},
    {"FP8 TT", CUBLAS_STATUS_NOT_SUPPORTED, [](auto&, auto&, auto&, auto&, auto&, auto&, auto&, auto&, Call& c) { c.transb = CUBLAS_OP_T; }},
    {"FP8 NT", CUBLAS_STATUS_NOT_SUPPORTED,
     [](auto&, auto&, auto&, auto&, auto&, auto&, auto&, auto&, Call& c) { c.transa = CUBLAS_OP_N, c.transb = CUBLAS_OP_T; }},
    {"FP8 k not a multiple of 16", CUBLAS_STATUS_NOT_SUPPORTED,
     [](auto&, auto&, auto&, auto&, auto&, auto&, int64_t& k, int64_t& lda, Call&) { k = 40, lda = 48; }},
    {"FP8 lda not a multiple of 16", CUBLAS_STATUS_NOT_SUPPORTED,
     [](auto&, auto&, auto&, auto&, auto&, auto&, auto&, int64_t& lda, Call&) { lda = 40; }},
    {"FP8 m * sizeof(C) not a multiple of 16 bytes", CUBLAS_STATUS_NOT_SUPPORTED,
     [](auto&, auto&, auto&, auto&, int64_t& m, auto&, auto&, auto&, Call&) { m = 12; }},
    {"E5M2 x E5M2", CUBLAS_STATUS_NOT_SUPPORTED,
     [](cudaDataType_t& ta, cudaDataType_t& tb, auto&, auto&, auto&, auto&, auto&, auto&, Call&) { ta = tb = CUDA_R_8F_E5M2; }},
    {"FP8 x BF16", CUBLAS_STATUS_NOT_SUPPORTED,
     [](auto&, cudaDataType_t& tb, auto&, auto&, auto&, auto&, auto&, auto&, Call&) { tb = CUDA_R_16BF; }},
    {"FP8 D with an F32 C", CUBLAS_STATUS_NOT_SUPPORTED,
     [](auto&, auto&, cudaDataType_t& tc, cudaDataType_t& td, auto&, auto&, auto&, auto&, Call&) { tc = CUDA_R_32F, td = CUDA_R_8F_E4M3; }},
    {"FP8 into an FP8 C", CUBLAS_STATUS_NOT_SUPPORTED,
     [](auto&, auto&, cudaDataType_t& tc, cudaDataType_t& td, auto&, auto&, auto&, auto&, Call&) { tc = td = CUDA_R_8F_E4M3; }},
    {"E5M2 D from E4M3 x E4M3", CUBLAS_STATUS_NOT_SUPPORTED,
     [](auto&, auto&, auto&, cudaDataType_t& td, auto&, auto&, auto&, auto&, Call&) { td = CUDA_R_8F_E5M2; }},
    {"BF16 D from an F16 C", CUBLAS_STATUS_NOT_SUPPORTED,
     [](auto&, auto&, cudaDataType_t& tc, auto&, auto&, auto&, auto&, auto&, Call&) { tc = CUDA_R_16F; }},
    {"BF16 x F16", CUBLAS_STATUS_NOT_SUPPORTED,
     [](cudaDataType_t& ta, cudaDataType_t& tb, auto&, auto&, auto&, auto&, auto&, auto&, Call&) { ta = CUDA_R_16BF, tb = CUDA_R_16F; }},
    {"BF16 inputs into an F16 D", CUBLAS_STATUS_NOT_SUPPORTED,
     [](cudaDataType_t& ta, cudaDataType_t& tb, cudaDataType_t& tc, cudaDataType_t& td, auto&, auto&, auto&, auto&, Call&) {
       ta = tb = CUDA_R_16BF, tc = td = CUDA_R_16F;
     }},
    {"A scale with BF16 inputs", CUBLAS_STATUS_INVALID_VALUE,
     [](cudaDataType_t& ta, cudaDataType_t& tb, auto&, auto&, auto&, auto&, auto&, auto&, Call& c) {
       ta = tb = CUDA_R_16BF, c.a_scale = &kScale;
     }},
    {"D amax with BF16 inputs", CUBLAS_STATUS_INVALID_VALUE,
     [](cudaDataType_t& ta, cudaDataType_t& tb, auto&, auto&, auto&, auto&, auto&, auto&, Call& c) {
       ta = tb = CUDA_R_16BF, c.amax_d = &amax_sink;
     }},
    {"D scale with a BF16 D", CUBLAS_STATUS_INVALID_VALUE,
     [](auto&, auto&, auto&, auto&, auto&, auto&, auto&, auto&, Call& c) { c.d_scale = &kScale; }},
    {"row-major order", CUBLAS_STATUS_NOT_SUPPORTED,
     [](auto&, auto&, auto&, auto&, auto&, auto&, auto&, auto&, Call& c) { c.order = CUBLASLT_ORDER_ROW; }},
    {"ReLU epilogue", CUBLAS_STATUS_NOT_SUPPORTED,
     [](auto&, auto&, auto&, auto&, auto&, auto&, auto&, auto&, Call& c) { c.epilogue = CUBLASLT_EPILOGUE_RELU_BIAS; }},
    {"unknown epilogue", CUBLAS_STATUS_INVALID_VALUE,
     [](auto&, auto&, auto&, auto&, auto&, auto&, auto&, auto&, Call& c) { c.epilogue = 3; }},
    {"bias of another type", CUBLAS_STATUS_NOT_SUPPORTED,
     [](auto&, auto&, auto&, auto&, auto&, auto&, auto&, auto&, Call& c) {
       c.epilogue = CUBLASLT_EPILOGUE_BIAS, c.bias = vector_sink, c.bias_type = CUDA_R_32F;
     }},
    {"aux ld not a multiple of 8", CUBLAS_STATUS_INVALID_VALUE,
     [](auto&, auto&, auto&, auto&, auto&, auto&, auto&, auto&, Call& c) {
       c.epilogue = CUBLASLT_EPILOGUE_GELU_AUX, c.aux = vector_sink, c.aux_ld = 36;
     }},
    {"aux ld below rows", CUBLAS_STATUS_INVALID_VALUE,
     [](auto&, auto&, auto&, auto&, auto&, auto&, auto&, auto&, Call& c) {
       c.epilogue = CUBLASLT_EPILOGUE_DGELU, c.aux = vector_sink, c.aux_ld = 24;
     }},
    {"GELU aux with an FP8 D", CUBLAS_STATUS_NOT_SUPPORTED,
     [](auto&, auto&, auto&, cudaDataType_t& td, auto&, auto&, auto&, auto&, Call& c) {
       td = CUDA_R_8F_E4M3, c.epilogue = CUBLASLT_EPILOGUE_GELU_AUX, c.aux = vector_sink, c.aux_ld = 32;
     }},
    {"TRANSC", CUBLAS_STATUS_NOT_SUPPORTED,
     [](auto&, auto&, auto&, auto&, auto&, auto&, auto&, auto&, Call& c) { c.transc = CUBLAS_OP_T; }},
    {"compute 16F", CUBLAS_STATUS_NOT_SUPPORTED,
     [](auto&, auto&, auto&, auto&, auto&, auto&, auto&, auto&, Call& c) { c.compute = CUBLAS_COMPUTE_16F; }},
    {"scale type BF16", CUBLAS_STATUS_NOT_SUPPORTED,
     [](auto&, auto&, auto&, auto&, auto&, auto&, auto&, auto&, Call& c) { c.scale_type = CUDA_R_16BF; }},
    {"TF32 with BF16 inputs", CUBLAS_STATUS_NOT_SUPPORTED,
     [](cudaDataType_t& ta, cudaDataType_t& tb, auto&, auto&, auto&, auto&, auto&, auto&, Call& c) {
       ta = tb = CUDA_R_16BF, c.compute = CUBLAS_COMPUTE_32F_FAST_TF32;
     }},
};

TEST(CublasLtRefusals, EachWithCublasLtsStatusAndDUntouched) {
  std::mt19937 rng(9);
  for (const Refusal& r : kRefusals) {
    SCOPED_TRACE(r.what);
    cudaDataType_t ta = CUDA_R_8F_E4M3, tb = CUDA_R_8F_E4M3, tc = CUDA_R_16BF, td = CUDA_R_16BF;
    int64_t m = 32, n = 16, k = 32, lda = 32;
    Call call;
    call.transa = CUBLAS_OP_T;
    r.change(ta, tb, tc, td, m, n, k, lda, call);
    // The layouts follow the transposes the case chose, so only the refused property is wrong.
    const bool na = call.transa == CUBLAS_OP_N, nb = call.transb == CUBLAS_OP_N;
    Matrix a(ta, na ? m : k, na ? k : m, na ? m : lda), b(tb, nb ? k : n, nb ? n : k, nb ? lda : n);
    a.fill_random(rng, 0.5, 1.0);
    b.fill_random(rng, 0.5, 1.0);
    Matrix c(tc, m, n, m), d(td, m, n, m);
    const std::vector<uint8_t> poison = d.bytes;
    const Statuses s = run(call, a, b, &c, d);
    EXPECT_EQ(s.heuristic, r.status) << s.why;
    EXPECT_EQ(s.matmul, r.status) << s.why;
    EXPECT_NE(s.why, "");
    EXPECT_EQ(d.bytes, poison) << "a refused call wrote D";
  }
}

TEST(CublasLtRefusals, TheBaseCaseOfTheTableIsAccepted) {
  // Guards the table above: each case differs from this accepted call by the one property it names.
  std::mt19937 rng(10);
  Matrix a(CUDA_R_8F_E4M3, 32, 32, 32), b(CUDA_R_8F_E4M3, 32, 16, 32), c(CUDA_R_16BF, 32, 16, 32),
      d(CUDA_R_16BF, 32, 16, 32);
  a.fill_random(rng, 0.5, 1.0);
  b.fill_random(rng, 0.5, 1.0);
  Call call;
  call.transa = CUBLAS_OP_T;
  const Statuses s = run(call, a, b, &c, d);
  EXPECT_EQ(s.heuristic, CUBLAS_STATUS_SUCCESS) << s.why;
  EXPECT_EQ(s.matmul, CUBLAS_STATUS_SUCCESS) << s.why;
  EXPECT_EQ(s.why, "");
}

TEST(CublasLtRefusals, ShapesLeadingDimensionsBatchesAndPointers) {
  std::mt19937 rng(11);
  const auto product = [&](int64_t a_cols, int64_t lda, int64_t b_batch, bool null_bias) {
    Matrix a(CUDA_R_16BF, 8, a_cols, lda), b(CUDA_R_16BF, 6, 5, 6, b_batch), d(CUDA_R_16BF, 8, 5, 8);
    a.fill_random(rng, 0.5, 1.0);
    b.fill_random(rng, 0.5, 1.0);
    Call call;
    if (null_bias) call.epilogue = CUBLASLT_EPILOGUE_BIAS;
    const std::vector<uint8_t> poison = d.bytes;
    const Statuses s = run(call, a, b, nullptr, d);
    EXPECT_EQ(d.bytes, poison);
    return s;
  };
  EXPECT_EQ(product(7, 8, 1, false).heuristic, CUBLAS_STATUS_INVALID_VALUE);  // op(A) 8x7 against op(B) 6x5
  EXPECT_EQ(product(6, 7, 1, false).heuristic, CUBLAS_STATUS_INVALID_VALUE);  // lda 7 < rows 8
  EXPECT_EQ(product(6, 8, 2, false).heuristic, CUBLAS_STATUS_INVALID_VALUE);  // batch counts 1 and 2
  const Statuses no_bias = product(6, 8, 1, true);  // BIAS epilogue without BIAS_POINTER
  EXPECT_EQ(no_bias.heuristic, CUBLAS_STATUS_SUCCESS);  // the heuristic never dereferences pointers
  EXPECT_EQ(no_bias.matmul, CUBLAS_STATUS_INVALID_VALUE);

  // A heuristic asked for no result is an invalid call; the product itself needs no algo.
  {
    Matrix a(CUDA_R_16BF, 8, 6, 8), b(CUDA_R_16BF, 6, 5, 6), d(CUDA_R_16BF, 8, 5, 8);
    a.fill_random(rng, 0.5, 1.0);
    b.fill_random(rng, 0.5, 1.0);
    Call call;
    call.requested_algos = 0;
    const Statuses s = run(call, a, b, nullptr, d);
    EXPECT_EQ(s.heuristic, CUBLAS_STATUS_INVALID_VALUE);
    EXPECT_EQ(s.matmul, CUBLAS_STATUS_SUCCESS) << s.why;
  }

  // FP8 operands must be 16-byte aligned.
  Matrix a(CUDA_R_8F_E4M3, 32, 32, 32), b(CUDA_R_8F_E4M3, 32, 16, 32), d(CUDA_R_16BF, 32, 16, 32);
  a.fill_random(rng, 0.5, 1.0);
  b.fill_random(rng, 0.5, 1.0);
  cublasLtHandle_t h;
  ASSERT_EQ(cublasLtCreate(&h), CUBLAS_STATUS_SUCCESS);
  cublasLtMatmulDesc_t desc;
  ASSERT_EQ(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), CUBLAS_STATUS_SUCCESS);
  const int32_t t = CUBLAS_OP_T;
  ASSERT_EQ(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof t), CUBLAS_STATUS_SUCCESS);
  cublasLtMatrixLayout_t la = layout_of(a, CUBLASLT_ORDER_COL), lb = layout_of(b, CUBLASLT_ORDER_COL),
                         ld = layout_of(d, CUBLASLT_ORDER_COL);
  const float one = 1, zero = 0;
  EXPECT_EQ(cublasLtMatmul(h, desc, &one, a.bytes.data() + 1, la, b.data(), lb, &zero, d.data(), ld, d.data(), ld,
                           nullptr, nullptr, 0, nullptr),
            CUBLAS_STATUS_NOT_SUPPORTED);
  EXPECT_EQ(cublasLtMatmul(h, desc, &one, a.data(), la, b.data(), lb, &zero, d.data(), ld, d.data(), ld, nullptr,
                           nullptr, 0, nullptr),
            CUBLAS_STATUS_SUCCESS);
  cublasLtMatmulAlgo_t foreign{};
  EXPECT_EQ(cublasLtMatmul(h, desc, &one, a.data(), la, b.data(), lb, &zero, d.data(), ld, d.data(), ld, &foreign,
                           nullptr, 0, nullptr),
            CUBLAS_STATUS_INVALID_VALUE);
  for (auto l : {la, lb, ld}) cublasLtMatrixLayoutDestroy(l);
  cublasLtMatmulDescDestroy(desc);
  cublasLtDestroy(h);
}

TEST(CublasLtAttributes, SetGetSizesAndDefaults) {
  cublasLtMatmulDesc_t desc;
  ASSERT_EQ(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), CUBLAS_STATUS_SUCCESS);
  uint32_t epilogue = 0;
  size_t written = 0;
  ASSERT_EQ(cublasLtMatmulDescGetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue, &written),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(epilogue, CUBLASLT_EPILOGUE_DEFAULT);
  EXPECT_EQ(written, sizeof epilogue);
  epilogue = CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
  ASSERT_EQ(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue),
            CUBLAS_STATUS_SUCCESS);
  uint32_t back = 0;
  ASSERT_EQ(cublasLtMatmulDescGetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &back, sizeof back, &written),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(back, epilogue);
  // The wrong size for the attribute's type, a size query, an attribute outside the emulated set.
  const int64_t wide = 1;
  EXPECT_EQ(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &wide, sizeof wide),
            CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(cublasLtMatmulDescGetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, nullptr, 0, &written),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(written, sizeof(void*));
  const int8_t fast = 1;
  EXPECT_EQ(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof fast),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasLtMatmulDescSetAttribute(desc, static_cast<cublasLtMatmulDescAttributes_t>(16), &fast, 1),
            CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(cublasLtMatmulDescDestroy(desc), CUBLAS_STATUS_SUCCESS);

  cublasLtMatrixLayout_t l;
  ASSERT_EQ(cublasLtMatrixLayoutCreate(&l, CUDA_R_16BF, 5, 7, 8), CUBLAS_STATUS_SUCCESS);
  uint64_t rows = 0;
  int64_t ld = 0;
  int32_t batch = 0;
  EXPECT_EQ(cublasLtMatrixLayoutGetAttribute(l, CUBLASLT_MATRIX_LAYOUT_ROWS, &rows, sizeof rows, &written),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasLtMatrixLayoutGetAttribute(l, CUBLASLT_MATRIX_LAYOUT_LD, &ld, sizeof ld, &written), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasLtMatrixLayoutGetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof batch, &written),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(rows, 5u);
  EXPECT_EQ(ld, 8);
  EXPECT_EQ(batch, 1);
  EXPECT_EQ(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_ROWS, &batch, sizeof batch),
            CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(cublasLtMatrixLayoutDestroy(l), CUBLAS_STATUS_SUCCESS);

  cublasLtMatmulPreference_t pref;
  ASSERT_EQ(cublasLtMatmulPreferenceCreate(&pref), CUBLAS_STATUS_SUCCESS);
  const uint32_t small = 4;
  EXPECT_EQ(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &small, sizeof small),
            CUBLAS_STATUS_INVALID_VALUE);
  const uint64_t workspace = 1 << 20;
  uint64_t back_ws = 0;
  EXPECT_EQ(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
                                                 sizeof workspace),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasLtMatmulPreferenceGetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &back_ws,
                                                 sizeof back_ws, &written),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(back_ws, workspace);
  EXPECT_EQ(cublasLtMatmulPreferenceDestroy(pref), CUBLAS_STATUS_SUCCESS);

  EXPECT_EQ(cublasLtDestroy(nullptr), CUBLAS_STATUS_NOT_INITIALIZED);
  EXPECT_STREQ(cublasLtGetStatusName(CUBLAS_STATUS_NOT_INITIALIZED), "CUBLAS_STATUS_NOT_INITIALIZED");
  EXPECT_NE(std::string(cublasLtGetStatusString(CUBLAS_STATUS_NOT_INITIALIZED)).find("not a handle"), std::string::npos);
  EXPECT_STREQ(cublasLtGetStatusString(CUBLAS_STATUS_SUCCESS), "CUBLAS_STATUS_SUCCESS");
}

TEST(CublasLtAttributes, CublasCheckNamesTheStatus) {
  try {
    CUBLAS_CHECK(cublasLtDestroy(nullptr));
    FAIL() << "CUBLAS_CHECK did not throw";
  } catch (const gpt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("cublasLtDestroy"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("status 1"), std::string::npos) << e.what();
  }
}

// A backend kept in a static (the tests keep one) is destroyed at exit after the thread's thread_local
// objects, so its cublasLt*Destroy calls come after the refusal strings are gone, and must not write to
// them: under ASan a heap-use-after-free aborts the child, which fails this test in the sanitized build.
TEST(CublasLtAttributes, CallsAtExitAfterTheThreadsStorageIsGoneTouchNothingFreed) {
  EXPECT_EXIT(
      {
        static cublasLtHandle_t handle = nullptr;
        if (cublasLtCreate(&handle) != CUBLAS_STATUS_SUCCESS) std::_Exit(2);
        cublasLtDestroy(nullptr);  // a refusal long enough for its text to live on the heap
        std::atexit([] {
          const bool destroyed = cublasLtDestroy(handle) == CUBLAS_STATUS_SUCCESS;
          const bool named = std::string(cublasLtGetStatusString(CUBLAS_STATUS_NOT_INITIALIZED)) ==
                             "CUBLAS_STATUS_NOT_INITIALIZED";
          std::_Exit(destroyed && named ? 0 : 3);
        });
        std::exit(1);
      },
      ::testing::ExitedWithCode(0), "");
}

}  // namespace
