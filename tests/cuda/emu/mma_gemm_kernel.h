// A small tensor-core GEMM kernel of the emulator's tests (test_tensor_core.cpp checks it against a
// triple loop, test_speed.cpp times it): cp.async, ldmatrix and mma.sync through common/mma.cuh.
#pragma once

#include <cstdint>

#include "common/mma.cuh"

namespace gpt::cuda::test {

// C (M x N, FP32) = A (M x K, row-major) * B (K x N, row-major), 16-bit inputs: a block of 4 warps per
// 64x64 tile of C, K in steps of 64 through shared memory filled by cp.async; A fragments by ldmatrix.x4,
// B fragments by ldmatrix.x2.trans (B is K-major in shared memory), 8 mma tiles of 16x8 per warp.
constexpr int kTile = 64, kPad = 8;
template <MmaInput kIn>
__global__ void mma_gemm(const uint16_t* A, const uint16_t* B, float* C, int M, int N, int K) {
  __shared__ __align__(16) uint16_t As[kTile][kTile + kPad];
  __shared__ __align__(16) uint16_t Bs[kTile][kTile + kPad];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, t = lane % 4;
  const int row0 = blockIdx.y * kTile, col0 = blockIdx.x * kTile;
  float acc[8][4] = {};
  for (int k0 = 0; k0 < K; k0 += kTile) {
    for (int chunk = threadIdx.x; chunk < kTile * kTile / 8; chunk += blockDim.x) {
      const int r = chunk / 8, c = chunk % 8 * 8;
      cp_async<16>(&As[r][c], A + static_cast<size_t>(row0 + r) * K + k0 + c);
      cp_async<16>(&Bs[r][c], B + static_cast<size_t>(k0 + r) * N + col0 + c);
    }
    cp_async_commit();
    cp_async_wait<0>();
    __syncthreads();
    for (int kk = 0; kk < kTile; kk += 16) {
      uint32_t a[4];
      ldmatrix<4>(a, &As[warp * 16 + lane % 16][kk + 8 * (lane / 16)]);
      for (int nt = 0; nt < 8; ++nt) {
        uint32_t b[2];
        ldmatrix<2, true>(b, &Bs[kk + lane % 16][nt * 8]);
        mma_m16n8k16<kIn>(acc[nt], a, b, acc[nt]);
      }
    }
    __syncthreads();
  }
  for (int nt = 0; nt < 8; ++nt)
    for (int i = 0; i < 4; ++i)
      C[static_cast<size_t>(row0 + warp * 16 + g + 8 * (i >= 2)) * N + col0 + nt * 8 + 2 * t + (i & 1)] = acc[nt][i];
}

}  // namespace gpt::cuda::test
