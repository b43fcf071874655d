// ldmatrix, mma.sync.m16n8k16 and cp.async through common/mma.cuh, element by element against the PTX
// ISA's layout formulas, and a 64x64x64 product built from them against a plain triple loop.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "common/launch.cuh"
#include "common/mma.cuh"
#include "cuda/emu/emu_test_util.h"
#include "cuda/emu/mma_gemm_kernel.h"
#include "precision/float_formats.h"

namespace gpt::cuda::test {
namespace {

// Four 8x8 matrices of 16-bit codes (j << 12 | row << 4 | col) with rows 48 bytes apart, so each lane's
// row address matters; out[lane * 4 + j] is the lane's register j.
constexpr int kRowStride = 24;
template <int kCount, bool kTrans>
__global__ void load_matrices(const uint16_t* codes, uint32_t* out) {
  __shared__ __align__(16) uint16_t s[4 * 8 * kRowStride];
  for (int i = threadIdx.x; i < 4 * 8 * kRowStride; i += 32) s[i] = codes[i];
  __syncwarp();
  const int lane = threadIdx.x;
  const int matrix = (lane / 8) % kCount, row = lane % 8;
  uint32_t r[kCount];
  ldmatrix<kCount, kTrans>(r, s + (matrix * 8 + row) * kRowStride);
  for (int j = 0; j < kCount; ++j) out[lane * 4 + j] = r[j];
}

std::vector<uint16_t> matrix_codes() {
  std::vector<uint16_t> codes(4 * 8 * kRowStride, 0xEEEE);
  for (int j = 0; j < 4; ++j)
    for (int row = 0; row < 8; ++row)
      for (int col = 0; col < 8; ++col) codes[(j * 8 + row) * kRowStride + col] = (j << 12) | (row << 4) | col;
  return codes;
}

template <int kCount, bool kTrans>
void check_ldmatrix() {
  DeviceArray<uint16_t> codes(matrix_codes());
  DeviceArray<uint32_t> out(32 * 4);
  launch<load_matrices<kCount, kTrans>>(dim3(1), dim3(32), 0, nullptr, codes.get(), out.get());
  const std::vector<uint32_t> got = out.download();
  auto code = [](int j, int row, int col) { return static_cast<uint32_t>((j << 12) | (row << 4) | col); };
  for (int lane = 0; lane < 32; ++lane)
    for (int j = 0; j < kCount; ++j) {
      const int g = lane >> 2, t = lane % 4;
      // Without .trans: row g, columns 2t, 2t+1 (the ISA's text); .trans: the transpose (its figure).
      const uint32_t lo = kTrans ? code(j, 2 * t, g) : code(j, g, 2 * t);
      const uint32_t hi = kTrans ? code(j, 2 * t + 1, g) : code(j, g, 2 * t + 1);
      EXPECT_EQ(got[lane * 4 + j], lo | (hi << 16)) << "x" << kCount << (kTrans ? ".trans" : "") << " lane "
                                                     << lane << " register " << j;
    }
}

TEST_F(EmuTest, LdmatrixDeliversTheFragmentLayoutOfThePtxIsa) {
  check_ldmatrix<1, false>();
  check_ldmatrix<2, false>();
  check_ldmatrix<4, false>();
  check_ldmatrix<1, true>();
  check_ldmatrix<2, true>();
  check_ldmatrix<4, true>();
}

// One mma from fragments each lane assembles with the ISA's formulas out of row-major A (16x16),
// B (16x8) and C (16x8); D comes back through the C layout.
template <MmaInput kIn>
__global__ void one_mma(const uint16_t* A, const uint16_t* B, const float* C, float* D) {
  const int lane = threadIdx.x, g = lane >> 2, t = lane % 4;
  uint32_t a[4] = {}, b[2] = {};
  float c[4], d[4];
  for (int i = 0; i < 8; ++i) {
    const int row = g + 8 * ((i >> 1) & 1), col = 2 * t + (i & 1) + 8 * (i >= 4);
    a[i / 2] |= uint32_t{A[row * 16 + col]} << (16 * (i % 2));
  }
  for (int i = 0; i < 4; ++i) {
    const int row = 2 * t + (i & 1) + 8 * (i >= 2), col = g;
    b[i / 2] |= uint32_t{B[row * 8 + col]} << (16 * (i % 2));
  }
  for (int i = 0; i < 4; ++i) c[i] = C[(g + 8 * (i >= 2)) * 8 + 2 * t + (i & 1)];
  mma_m16n8k16<kIn>(d, a, b, c);
  for (int i = 0; i < 4; ++i) D[(g + 8 * (i >= 2)) * 8 + 2 * t + (i & 1)] = d[i];
}

template <MmaInput kIn>
void check_one_mma() {
  // Small integers: every product and sum is exact in FP32, so D must equal the triple loop bitwise, and
  // an element in the wrong place changes it.
  std::vector<uint16_t> A(16 * 16), B(16 * 8);
  std::vector<float> a(16 * 16), b(16 * 8), C(16 * 8);
  auto encode = [](float v) { return kIn == MmaInput::kBf16 ? f32_to_bf16(v) : f32_to_f16(v); };
  for (int i = 0; i < 256; ++i) A[i] = encode(a[i] = static_cast<float>((i * 37) % 17 - 8));
  for (int i = 0; i < 128; ++i) B[i] = encode(b[i] = static_cast<float>((i * 11) % 13 - 6));
  for (int i = 0; i < 128; ++i) C[i] = static_cast<float>(i % 9) * 0.5f;
  DeviceArray<uint16_t> dA(A), dB(B);
  DeviceArray<float> dC(C), dD(16 * 8);
  launch<one_mma<kIn>>(dim3(1), dim3(32), 0, nullptr, dA.get(), dB.get(), dC.get(), dD.get());
  const std::vector<float> D = dD.download();
  for (int m = 0; m < 16; ++m)
    for (int n = 0; n < 8; ++n) {
      float ref = C[m * 8 + n];
      for (int k = 0; k < 16; ++k) ref += a[m * 16 + k] * b[k * 8 + n];
      EXPECT_EQ(D[m * 8 + n], ref) << m << " " << n;
    }
}

TEST_F(EmuTest, MmaPlacesEveryFragmentElementAsThePtxIsaSays) {
  check_one_mma<MmaInput::kBf16>();
  check_one_mma<MmaInput::kF16>();
}

template <MmaInput kIn>
void check_gemm(int M, int N, int K) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  auto encode = [](float v) { return kIn == MmaInput::kBf16 ? f32_to_bf16(v) : f32_to_f16(v); };
  auto decode = [](uint16_t c) { return kIn == MmaInput::kBf16 ? bf16_to_f32(c) : f16_to_f32(c); };
  std::vector<uint16_t> A(static_cast<size_t>(M) * K), B(static_cast<size_t>(K) * N);
  for (auto& v : A) v = encode(dist(rng));
  for (auto& v : B) v = encode(dist(rng));
  DeviceArray<uint16_t> dA(A), dB(B);
  DeviceArray<float> dC(static_cast<size_t>(M) * N);
  launch<mma_gemm<kIn>>(dim3(N / kTile, M / kTile), dim3(128), 0, nullptr, dA.get(), dB.get(), dC.get(), M, N, K);
  const std::vector<float> C = dC.download();
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      double ref = 0, mag = 0;
      for (int k = 0; k < K; ++k) {
        const double p = static_cast<double>(decode(A[static_cast<size_t>(m) * K + k])) * decode(B[static_cast<size_t>(k) * N + n]);
        ref += p;
        mag += std::fabs(p);
      }
      // One FP32 rounding per 16-deep mma step.
      ASSERT_NEAR(C[static_cast<size_t>(m) * N + n], ref, (K / 16 + 1) * 0x1p-24 * mag) << m << " " << n;
    }
}

TEST_F(EmuTest, A64Cubed16BitProductFromLdmatrixAndMmaMatchesATripleLoop) {
  check_gemm<MmaInput::kBf16>(64, 64, 64);
  check_gemm<MmaInput::kF16>(64, 64, 64);
}

TEST_F(EmuTest, A64Cubed16BitProductOverSeveralTilesAndKSteps) { check_gemm<MmaInput::kBf16>(128, 64, 192); }

// cp.async lands at the covering wait_group: before it the destination still holds what it held.
__global__ void async_copy_groups(const float* src, float* out) {
  __shared__ __align__(16) float s[14];
  for (int i = 0; i < 14; ++i) s[i] = -1.0f;
  cp_async<16>(&s[0], src);
  cp_async_commit();
  cp_async<16>(&s[4], src + 4);
  cp_async_commit();
  cp_async<16>(&s[8], src + 8, 8);  // 8 bytes copied, 8 zeroed
  cp_async<4>(&s[12], src + 5);
  cp_async<4>(&s[13], src, 0);  // nothing copied, 4 bytes zeroed
  cp_async_commit();
  out[0] = s[0];
  cp_async_wait<2>();  // the oldest group is complete
  out[1] = s[0];
  out[2] = s[4];
  out[17] = s[12];
  cp_async_wait<0>();
  for (int i = 0; i < 14; ++i) out[3 + i] = s[i];
}

TEST_F(EmuTest, CpAsyncCompletesByGroupAndZeroFills) {
  std::vector<float> src(12);
  for (int i = 0; i < 12; ++i) src[i] = static_cast<float>(i + 1);
  DeviceArray<float> d_src(src), out(18);
  launch<async_copy_groups>(dim3(1), dim3(1), 0, nullptr, d_src.get(), out.get());
  const std::vector<float> got = out.download();
  EXPECT_EQ(got[0], -1.0f);
  EXPECT_EQ(got[1], 1.0f);
  EXPECT_EQ(got[2], -1.0f);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(got[3 + i], static_cast<float>(i + 1));
  EXPECT_EQ(got[13], 0.0f);
  EXPECT_EQ(got[14], 0.0f);
  EXPECT_EQ(got[15], 6.0f);
  EXPECT_EQ(got[16], 0.0f);
  EXPECT_EQ(got[17], -1.0f);  // before the last group's wait
}

__global__ void misaligned_ldmatrix(uint32_t* out) {
  __shared__ __align__(16) uint16_t s[8 * 16 + 8];
  uint32_t r[1];
  ldmatrix<1>(r, s + 1 + (threadIdx.x % 8) * 16);
  out[threadIdx.x] = r[0];
}

TEST_F(EmuTest, LdmatrixRefusesMisalignedRows) {
  DeviceArray<uint32_t> out(32);
  emu::launch<misaligned_ldmatrix>(dim3(1), dim3(32), 0, nullptr, out.get());
  const cudaError_t e = cudaDeviceSynchronize();
  EXPECT_EQ(e, cudaErrorLaunchFailure);
  EXPECT_NE(error_text(e).find("is not 16-byte aligned"), std::string::npos) << error_text(e);
}

// On a Turing GPU (7.5) ldmatrix exists and mma.sync.m16n8k16 with BF16 inputs and cp.async do not: a
// kernel that runs them fails naming the instruction, as no GPU build would hold it for that device.
TEST_F(EmuTest, AnInstructionNewerThanTheDeviceFailsTheKernelNamingIt) {
  const EmulatedDevice t4(tesla_t4());
  check_ldmatrix<4, true>();
  {
    DeviceArray<uint16_t> a(16 * 16), b(16 * 8);
    DeviceArray<float> c(16 * 8), d(16 * 8);
    emu::launch<one_mma<MmaInput::kBf16>>(dim3(1), dim3(32), 0, nullptr, a.get(), b.get(), c.get(), d.get());
    const cudaError_t e = cudaDeviceSynchronize();
    EXPECT_EQ(e, cudaErrorLaunchFailure);
    EXPECT_NE(error_text(e).find("mma.sync.m16n8k16 with BF16 inputs needs compute capability 8.0; the emulated "
                                 "device is 7.5"),
              std::string::npos)
        << error_text(e);
  }
  cudaDeviceReset();  // the launch failure is sticky, as on a GPU
  DeviceArray<float> src(12), out(18);
  emu::launch<async_copy_groups>(dim3(1), dim3(1), 0, nullptr, src.get(), out.get());
  const cudaError_t e = cudaDeviceSynchronize();
  EXPECT_EQ(e, cudaErrorLaunchFailure);
  EXPECT_NE(error_text(e).find("cp.async needs compute capability 8.0"), std::string::npos) << error_text(e);
}

}  // namespace
}  // namespace gpt::cuda::test
