// row_product: out[i,j] = alpha a_inv b_inv sum_k op(a)[i,k] op(b)[k,j] + beta out[i,j] + bias[j], where
// a_inv and b_inv are the FP8 operands' scale_inv (1 for the other formats), as src/cpu/matmul.cpp
// applies them: the codes enter unscaled and the inverse scales multiply alpha. Every element is read
// exactly in FP32 (tensor_access.cuh's load), the sum is FP32, and the result is stored once, after beta
// and bias, in out's format (FP8 with out's scale, saturating, its statistics added to out's state).
//
// Layout: row-major with folded leading dimensions; op(a)[i,k] is a[i*K + k], or a[k*M + i] when
// trans_a; op(b)[k,j] is b[k*N + j], or b[j*K + k] when trans_b. Two kernels, by how b is stored:
//   trans_b (b stored [N,K]: the linear layers' weights, the cached keys): one warp per output element,
//     lanes striding over k so a warp reads 32 consecutive packs of 8 elements of b's row (16-byte loads
//     for the 16-bit formats; 32 consecutive elements where K is not a multiple of 8 or a row is not
//     aligned), then the butterfly warp sum (block_reduce.cuh). Blocks of 8 warps take 8 neighbouring
//     columns of one output row.
//   !trans_b (b stored [K,N]: the cached values): one thread per output element walking k in order, so
//     neighbouring threads read neighbouring elements of each row of b.
// The warp sum adds in a different order than the CPU's sgemm, so results agree to FP32 rounding of the
// K-term sum, not bitwise. Nothing else is fused; every output element is written by one thread.
#include "gemm/row_product.h"

#include "common/block_reduce.cuh"
#include "common/launch.cuh"
#include "common/tensor_access.cuh"
#include "common/vector_access.cuh"

namespace gpt::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kWarpsPerBlock = kThreads / 32;

struct RowProductShape {
  int64_t m, n, k;
  bool trans_a, trans_b;
  float alpha, beta;
};

__device__ __forceinline__ int64_t a_index(const RowProductShape& s, int64_t i, int64_t kk) {
  return s.trans_a ? kk * s.m + i : i * s.k + kk;
}

// alpha a_inv b_inv acc + beta out + bias, stored at out[i, j]; the tally gathers an FP8 out's statistics.
__device__ __forceinline__ void finish(const RowProductShape& s, TensorRef out, TensorRef bias, int64_t i, int64_t j,
                                       float scaled_alpha, float acc, Fp8Tally* tally) {
  const int64_t at = i * s.n + j;
  float v = scaled_alpha * acc;
  if (s.beta != 0.0f) v += s.beta * load(out, at, read_scale_inv(out));
  if (bias.data) v += load(bias, j, read_scale_inv(bias));
  store(out, at, v, write_scale(out), true, tally);
}

// vector: a's row i and b's row j are read in packs of kPack (16-byte loads for the 16-bit formats, 8-byte
// for FP8), lane l taking packs l, l + 32, ... (K a multiple of kPack, both rows contiguous and aligned);
// otherwise element by element, lane l taking k = l, l + 32, ....
__global__ void __launch_bounds__(kThreads)
    row_product_along_k_kernel(TensorRef out, TensorRef a, TensorRef b, TensorRef bias, RowProductShape s, bool vector) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t i = blockIdx.y, j = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + warp;
  const float scaled_alpha = s.alpha * read_scale_inv(a) * read_scale_inv(b);
  Fp8Tally tally;
  Fp8Tally* out_tally = tally_of(out, tally);
  if (j < s.n) {
    float acc = 0.0f;
    if (vector) {
      for (int64_t kk = lane * kPack; kk < s.k; kk += 32 * kPack) {
        float av[kPack], bv[kPack];
        load_values(a, i * s.k + kk, kPack, true, av);
        load_values(b, j * s.k + kk, kPack, true, bv);
        for (int e = 0; e < kPack; ++e) acc = fmaf(av[e], bv[e], acc);
      }
    } else {
      for (int64_t kk = lane; kk < s.k; kk += 32) acc = fmaf(load(a, a_index(s, i, kk)), load(b, j * s.k + kk), acc);
    }
    acc = warp_sum(acc);
    if (lane == 0) finish(s, out, bias, i, j, scaled_alpha, acc, out_tally);
  }
  flush_fp8_tally(out_tally ? out.scaling : nullptr, tally);
}

__global__ void __launch_bounds__(kThreads)
    row_product_along_n_kernel(TensorRef out, TensorRef a, TensorRef b, TensorRef bias, RowProductShape s) {
  const int64_t i = blockIdx.y, j = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  const float scaled_alpha = s.alpha * read_scale_inv(a) * read_scale_inv(b);
  Fp8Tally tally;
  Fp8Tally* out_tally = tally_of(out, tally);
  if (j < s.n) {
    float acc = 0.0f;
    for (int64_t kk = 0; kk < s.k; ++kk) acc = fmaf(load(a, a_index(s, i, kk)), load(b, kk * s.n + j), acc);
    finish(s, out, bias, i, j, scaled_alpha, acc, out_tally);
  }
  flush_fp8_tally(out_tally ? out.scaling : nullptr, tally);
}

}  // namespace

void row_product(const MatmulArgs& args, int64_t m, int64_t n, int64_t k, cudaStream_t stream) {
  GPT_CHECK(m <= kRowProductMaxRows, "matmul: the row product takes at most {} rows; this one has {}", kRowProductMaxRows, m);
  check_elementwise_format(args.out, "matmul", "out");
  check_elementwise_format(args.a, "matmul", "a");
  check_elementwise_format(args.b, "matmul", "b");
  if (!args.bias.empty()) check_elementwise_format(args.bias, "matmul", "bias");
  GPT_CHECK(args.out.data != args.a.data && args.out.data != args.b.data, "matmul: out must not alias an operand");
  if (m == 0 || n == 0) return;
  const RowProductShape s{m, n, k, args.trans_a, args.trans_b, args.alpha, args.beta};
  const TensorRef bias = args.bias.empty() ? TensorRef{} : tensor_ref(args.bias);
  if (args.trans_b) {
    const dim3 grid(static_cast<unsigned>((n + kWarpsPerBlock - 1) / kWarpsPerBlock), static_cast<unsigned>(m));
    // a's rows run along k when a is not transposed, or when it is a single row either way.
    const bool vector = k % kPack == 0 && (!args.trans_a || m == 1) && pack_aligned(args.a) && pack_aligned(args.b);
    launch<row_product_along_k_kernel>(grid, dim3(kThreads), 0, stream, tensor_ref(args.out), tensor_ref(args.a),
                                       tensor_ref(args.b), bias, s, vector);
  } else {
    const dim3 grid(static_cast<unsigned>((n + kThreads - 1) / kThreads), static_cast<unsigned>(m));
    launch<row_product_along_n_kernel>(grid, dim3(kThreads), 0, stream, tensor_ref(args.out), tensor_ref(args.a),
                                       tensor_ref(args.b), bias, s);
  }
}

}  // namespace gpt::cuda
