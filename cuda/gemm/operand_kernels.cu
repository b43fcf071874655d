// Kernels that prepare operands for Gemm's cuBLASLt products and finish what an epilogue cannot.
//
// transpose_bytes: out[c, r] = in[r, c], 1-byte elements (FP8 codes), and out[c, r] = 0 for rows <= r <
//   ld_out. Hopper and Ada multiply FP8 only "TN" (both operands K-contiguous), so an FP8 operand stored
//   the other way is transposed into Gemm's staging region first; the zero columns pad K to cuBLASLt's
//   multiple of 16 (a zero code is +0, which adds nothing to a product's sum). 32x32 tiles through shared
//   memory (padded by 4 bytes per row against bank conflicts): reads and writes both walk rows, so both are
//   coalesced. Edge tiles are guarded.
// widen_fp8: out = the FP8 codes as BF16/F16 values, unscaled, 8 at a time (8-byte loads, 16-byte stores)
//   where the rows allow. Every E4M3 and E5M2 value is exact in BF16 and F16 (3 and 2 mantissa bits,
//   exponents within range), so the widened product multiplies exactly the CPU's decoded codes; the
//   code's scale_inv goes into the product's alpha (fold_scales).
// fold_scales: one thread computes alpha * a_scale_inv * b_scale_inv on the device, where the FP8
//   scaling state lives (the host never reads it), in the CPU's order (alpha * a_inv, then * b_inv).
// add_bias: out[i, j] += bias[j] for an F32 out, when the bias's format is not the one cuBLASLt's BIAS
//   epilogue takes for the product's types. Grid-stride over elements.
// Nothing here is a reduction; every output element is written by one thread, so results are exact and
// deterministic.
#include "gemm/operand_kernels.h"

#include "common/cuda_check.h"
#include "common/launch.cuh"
#include "common/tensor_access.cuh"
#include "common/vector_access.cuh"

#include <algorithm>

namespace gpt::cuda {
namespace {

constexpr int kTile = 32;
constexpr int kTileRows = 8;  // threads per tile column: each thread moves kTile / kTileRows elements
constexpr int kThreads = 256;

__global__ void __launch_bounds__(kTile* kTileRows)
    transpose_bytes_kernel(uint8_t* out, int64_t ld_out, const uint8_t* in, int64_t rows, int64_t cols, int64_t ld_in) {
  __shared__ uint8_t tile[kTile][kTile + 4];
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * kTile, c0 = static_cast<int64_t>(blockIdx.x) * kTile;
  for (int i = threadIdx.y; i < kTile; i += kTileRows) {
    const int64_t r = r0 + i, c = c0 + threadIdx.x;
    if (r < rows && c < cols) tile[i][threadIdx.x] = in[r * ld_in + c];
  }
  __syncthreads();
  for (int i = threadIdx.y; i < kTile; i += kTileRows) {
    const int64_t c = c0 + i, r = r0 + threadIdx.x;
    if (r < ld_out && c < cols) out[c * ld_out + r] = r < rows ? tile[threadIdx.x][i] : uint8_t{0};
  }
}

// vector: cols and ld_in multiples of kPack and both tensors aligned, so a pack of out lies in one row of
// in and moves as one 8-byte load and one 16-byte store; element by element otherwise.
__global__ void __launch_bounds__(kThreads)
    widen_fp8_kernel(TensorRef out, TensorRef in, int64_t rows, int64_t cols, int64_t ld_in, bool vector) {
  for_each_pack(rows * cols, [&](int64_t i, int count) {
    float v[kPack];
    if (vector) {
      load_values(in, i / cols * ld_in + i % cols, count, true, v);
    } else {
      for (int e = 0; e < kPack; ++e) {
        const int64_t j = i + e;
        v[e] = e < count ? load(in, j / cols * ld_in + j % cols) : 0.0f;
      }
    }
    store_values(out, i, count, vector, v);
  });
}

__global__ void fold_scales_kernel(float* scalars, float alpha, float beta, const float* a_scale_inv,
                                   const float* b_scale_inv) {
  float a = alpha;
  if (a_scale_inv) a *= *a_scale_inv;
  if (b_scale_inv) a *= *b_scale_inv;
  scalars[0] = a;
  scalars[1] = beta;
}

__global__ void __launch_bounds__(kThreads)
    add_bias_kernel(float* out, int64_t rows, int64_t cols, int64_t ld, TensorRef bias) {
  const int64_t n = rows * cols;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / cols, c = i % cols;
    out[r * ld + c] += load(bias, c);
  }
}

int grid_for(int64_t n) { return static_cast<int>(std::clamp<int64_t>((n + kThreads - 1) / kThreads, 1, 65535)); }

}  // namespace

void transpose_bytes(void* out, int64_t ld_out, const void* in, int64_t rows, int64_t cols, int64_t ld_in,
                     cudaStream_t stream) {
  GPT_CHECK(ld_out >= rows, "transpose of a [{},{}] matrix into rows of {} elements", rows, cols, ld_out);
  if (rows == 0 || cols == 0) return;
  // Tiles over out's rows, the zero columns included.
  const int64_t tiles_r = (ld_out + kTile - 1) / kTile, tiles_c = (cols + kTile - 1) / kTile;
  GPT_CHECK(tiles_r <= 65535, "transpose of a [{},{}] matrix: more than 65535 row tiles", rows, cols);
  launch<transpose_bytes_kernel>(dim3(static_cast<unsigned>(tiles_c), static_cast<unsigned>(tiles_r)),
                                 dim3(kTile, kTileRows), 0, stream, static_cast<uint8_t*>(out), ld_out,
                                 static_cast<const uint8_t*>(in), rows, cols, ld_in);
}

void widen_fp8(void* out, DType out_dtype, const void* in, DType in_dtype, int64_t rows, int64_t cols, int64_t ld_in,
               cudaStream_t stream) {
  if (rows == 0 || cols == 0) return;
  const bool vector =
      cols % kPack == 0 && ld_in % kPack == 0 && pack_aligned(in, in_dtype) && pack_aligned(out, out_dtype);
  launch<widen_fp8_kernel>(dim3(pack_grid(rows * cols, kThreads)), dim3(kThreads), 0, stream,
                           TensorRef{out, out_dtype, nullptr}, TensorRef{const_cast<void*>(in), in_dtype, nullptr}, rows,
                           cols, ld_in, vector);
}

void fold_scales(float* scalars, float alpha, float beta, const float* a_scale_inv, const float* b_scale_inv,
                 cudaStream_t stream) {
  launch<fold_scales_kernel>(dim3(1), dim3(1), 0, stream, scalars, alpha, beta, a_scale_inv, b_scale_inv);
}

void add_bias(float* out, int64_t rows, int64_t cols, int64_t ld, const Tensor& bias, cudaStream_t stream) {
  if (rows == 0 || cols == 0) return;
  launch<add_bias_kernel>(dim3(grid_for(rows * cols)), dim3(kThreads), 0, stream, out, rows, cols, ld,
                          tensor_ref(bias));
}

}  // namespace gpt::cuda
