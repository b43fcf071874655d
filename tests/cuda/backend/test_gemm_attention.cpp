// Gemm and the materialised attention beyond the op table: the same call twice gives bitwise the same
// outputs (no float atomics, algorithms cached), an FP8 product whose shape cuBLASLt cannot take fails
// naming the shape, and F32 products use TF32 only when asked. On the emulator in CI, on a GPU when
// there is one.
#include "cuda/backend/op_table.h"

#include "backend/cuda_entry.h"
#include "backend/matmul_staging.h"
#include "gemm/matmul.h"
#include "gemm/row_product.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

namespace gpt::test {
namespace {

Backend* cuda_backend() {
  static std::unique_ptr<Backend> backend = cuda::device_count() > 0 ? cuda::make_backend() : nullptr;
  return backend.get();
}

#define GPT_NEED_CUDA()                                                       \
  Backend* cuda = cuda_backend();                                             \
  if (!cuda) GTEST_SKIP() << "no CUDA device (" << cuda::describe() << ")"

const OpCase& find_case(const std::string& name) {
  for (const OpCase& c : op_cases())
    if (c.name == name) return c;
  throw std::runtime_error("no op table case " + name);
}

// Runs the case twice from the same inputs and demands identical bits in every output.
void expect_bitwise_repeatable(Backend& backend, const std::string& name) {
  const OpCase& c = find_case(name);
  OpBench first(backend, 12345), second(backend, 12345);
  c.run(first);
  c.run(second);
  const auto a = first.results(), b = second.results();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].values.size(), b[i].values.size());
    size_t differ = 0;
    for (size_t j = 0; j < a[i].values.size(); ++j)
      if (std::memcmp(&a[i].values[j], &b[i].values[j], sizeof(double)) != 0) ++differ;
    EXPECT_EQ(differ, 0u) << name << " " << a[i].name << ": " << differ << " elements differ between two runs";
  }
}

TEST(CudaGemm, TheSameProductTwiceIsBitwiseEqual) {
  GPT_NEED_CUDA();
  for (const char* name : {"matmul/bf16xbf16->bf16+bf16bias/67x200x40/TN/beta1",
                           "matmul/e5m2xe4m3->f32/48x80x64/TN/beta1",  // both FP8 operands transposed first
                           "matmul/e4m3xe4m3->bf16+bf16bias/48x80x64/NT/beta0",
                           "matmul/bf16xe4m3->bf16+bf16bias/67x200x40/NN/beta0"})
    expect_bitwise_repeatable(*cuda, name);
}

TEST(CudaAttention, ForwardAndBackwardTwiceAreBitwiseEqual) {
  GPT_NEED_CUDA();
  for (const char* name : {"attention_forward/bf16/B2_T67_NH3_hs13/p0.1", "attention_backward/bf16/B2_T67_NH3_hs13/p0.1",
                           "attention_backward/f32/B2_T67_NH3_hs24/p0.1"})
    expect_bitwise_repeatable(*cuda, name);
}

TEST(CudaGemm, AnFp8ProductWithADimensionNotAMultipleOf16FailsNamingIt) {
  GPT_NEED_CUDA();
  OpBench b(*cuda, 1);
  MatmulArgs args;
  args.a = b.input({48, 40}, DType::E4M3);
  args.b = b.input({80, 40}, DType::E4M3);
  args.out = b.output({48, 80}, DType::BF16);
  args.trans_b = true;
  try {
    cuda->matmul(args);
    FAIL() << "a K = 40 FP8 product was accepted";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("[48,40]x[40,80]"), std::string::npos) << what;
    EXPECT_NE(what.find("multiples of 16"), std::string::npos) << what;
    EXPECT_NE(what.find("K = 40"), std::string::npos) << what;
  }
}

// Above kRowProductMaxRows rows a product cuBLASLt cannot take has no kernel to go to: it fails naming the
// operands' and the output's formats and the rule it breaks.
TEST(CudaGemm, AnUnsupportedFormatCombinationFailsNamingIt) {
  GPT_NEED_CUDA();
  OpBench b(*cuda, 2);
  static_assert(cuda::kRowProductMaxRows < 32);
  struct Refused {
    DType a, b, out, bias;  // bias F64: none
    const char* names;
    const char* rule;
  };
  const Refused cases[] = {
      {DType::F32, DType::BF16, DType::F32, DType::F64, "(a f32 (32,16), b bf16 (16,8), out f32)", "the operands' formats differ"},
      {DType::BF16, DType::BF16, DType::F16, DType::F64, "out f16)", "in their own format or F32 only"},
      {DType::E5M2, DType::E5M2, DType::BF16, DType::F64, "a e5m2", "cuBLASLt has no E5M2 x E5M2 product"},
      {DType::BF16, DType::BF16, DType::BF16, DType::F16, "out bf16)", "a bf16 output takes a bf16 bias (cuBLASLt's bias epilogue), not f16"},
  };
  for (const Refused& c : cases) {
    MatmulArgs args{b.output({32, 8}, c.out), b.input({32, 16}, c.a), b.input({16, 8}, c.b)};
    if (c.bias != DType::F64) args.bias = b.input({8}, c.bias);
    const std::string what = error_message([&] { cuda->matmul(args); });
    EXPECT_NE(what.find(c.names), std::string::npos) << what;
    EXPECT_NE(what.find(c.rule), std::string::npos) << what;
    EXPECT_NE(what.find("The CUDA backend multiplies F32 x F32 -> F32"), std::string::npos) << what;
  }
}

// F32 inputs with full mantissas: an FP32 product matches a double reference to FP32 rounding, a TF32
// one (inputs rounded to 10 mantissa bits) only to about 1e-3.
TEST(CudaGemm, F32ProductsUseTf32OnlyWhenAllowed) {
  if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device (" << cuda::describe() << ")";
  constexpr int64_t M = 16, N = 16, K = 64;
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(0.5f, 1.0f);
  std::vector<float> a(M * K), b(K * N), out(M * N);
  for (float& x : a) x = u(rng);
  for (float& x : b) x = u(rng);
  float *da, *db, *dout;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&da), a.size() * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&db), b.size() * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&dout), out.size() * 4), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(da, a.data(), a.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(db, b.data(), b.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
  cuda::Gemm gemm(90);
  const auto largest_error = [&] {
    MatmulArgs args{Tensor(dout, {M, N}), Tensor(da, {M, K}), Tensor(db, {K, N})};
    gemm.matmul(args, nullptr);
    EXPECT_EQ(cudaMemcpy(out.data(), dout, out.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    double worst = 0.0;
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double want = 0.0;
        for (int64_t q = 0; q < K; ++q) want += static_cast<double>(a[i * K + q]) * b[q * N + j];
        worst = std::max(worst, std::fabs(out[i * N + j] - want) / want);
      }
    return worst;
  };
  EXPECT_LT(largest_error(), 1e-6);
  gemm.set_allow_tf32(true);
  EXPECT_GT(largest_error(), 1e-5);
  gemm.set_allow_tf32(false);
  EXPECT_LT(largest_error(), 1e-6);
  for (float* p : {da, db, dout}) cudaFree(p);
}

// The copies a product stages (here a BF16 x E4M3 product's widened operand, 512 bytes) go to the staging
// the caller passes, sized by backend/matmul_staging.h: one byte short fails saying how much it needed and
// how much there was; the exact size runs. 32 rows: a smaller product without its staging would go to the
// row product instead.
TEST(CudaGemm, AProductGivenLessStagingThanItNeedsFailsSayingSo) {
  if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device (" << cuda::describe() << ")";
  void* memory = nullptr;
  ASSERT_EQ(cudaMalloc(&memory, 4 * 1024), cudaSuccess);
  ASSERT_EQ(cudaMemset(memory, 0, 4 * 1024), cudaSuccess);
  char* base = static_cast<char*>(memory);
  cuda::Gemm gemm(90);
  MatmulArgs args{Tensor(base, {32, 16}, DType::BF16), Tensor(base + 1024, {32, 16}, DType::BF16),
                  Tensor(base + 2048, {16, 16}, DType::E4M3)};
  EXPECT_EQ(matmul_staging({DType::BF16, DType::E4M3, 32, 16, 16, false, false}).bytes, 512u);
  for (const int64_t bytes : {0, 511}) {
    args.staging = bytes == 0 ? Tensor() : Tensor(base + 3072, {bytes}, DType::U8);
    try {
      gemm.matmul(args, nullptr);
      ADD_FAILURE() << "a product needing 512 bytes of staging ran with " << bytes;
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(fmt::format("need 512 bytes of MatmulArgs::staging, which has {}", bytes)), std::string::npos)
          << what;
    }
  }
  args.staging = Tensor(base + 3072, {512}, DType::U8);
  EXPECT_NO_THROW(gemm.matmul(args, nullptr));
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  cudaFree(memory);
}

}  // namespace
}  // namespace gpt::test
