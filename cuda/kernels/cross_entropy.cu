// Fused softmax cross-entropy over the first V = vocab_size columns of logits [N,Vp], as
// src/cpu/cross_entropy.cpp; columns V..Vp-1 are padding and take no part. Per row with target y:
//   m = max_{j<V} logits[j],  s = sum_{j<V} exp(logits[j] - m),  loss = log s + m - logits[y]
//   dlogits[j] = (exp(logits[j] - m) / s - [j == y]) * dloss for j < V, 0 for padding columns.
// Rows with y == -1 get loss 0 and a zero dlogits row. A target outside [0, V) other than -1 cannot be
// refused from the host without waiting for the device, so its row gets a NaN loss and NaN dlogits and
// the kernel records the first such row in ctx.input_errors, which the backend reports at its next copy
// to the host (the step's loss).
//
// One block per row, whole warps up to 256 threads, each thread walking 8-element chunks of the row
// (row_chunks.cuh: 128-bit accesses where the row allows, logits and dlogits each in its own format).
// Pass 1 is an online softmax: each thread keeps a running (max, sum of exponentials relative to it),
// rescaling the sum when a chunk raises the max; the threads' pairs are merged by a warp butterfly and
// then across warps in warp order, so every thread ends with the same (m, s) and the result is bitwise
// reproducible. Pass 2 (only with dlogits) recomputes each exponential and writes dlogits: no
// probability buffer. logits[y] is read before the merge's barrier, and every other element is read by
// the thread that writes it, so dlogits may alias logits. FP32 throughout; losses are F32.
#include "kernels/cross_entropy.h"

#include "backend/op_checks.h"
#include "common/cuda_check.h"
#include "common/input_errors.cuh"
#include "common/launch.cuh"
#include "common/row_chunks.cuh"

#include <cmath>

namespace gpt::cuda {
namespace {

constexpr int kMaxThreads = 256;

// A running softmax normaliser: sum = sum_j exp(x_j - max) over the elements seen; max -inf when none.
struct Normaliser {
  float max;
  float sum;
};

// Symmetric in its arguments (max and the two products commute), so both lanes of a butterfly agree.
__device__ __forceinline__ Normaliser merge(Normaliser a, Normaliser b) {
  const float m = fmaxf(a.max, b.max);
  const float sa = a.max == -INFINITY ? 0.0f : a.sum * expf(a.max - m);
  const float sb = b.max == -INFINITY ? 0.0f : b.sum * expf(b.max - m);
  return {m, sa + sb};
}

struct Params {
  float* losses;
  TensorRef dlogits;  // data null: loss only
  TensorRef logits;
  const int32_t* targets;
  int64_t padded_vocab;
  int64_t vocab;
  float dloss;
  bool vector;
  InputErrors* errors;
};

__global__ void __launch_bounds__(kMaxThreads) cross_entropy_kernel(Params p) {
  __shared__ Normaliser warp_totals[32];
  const int64_t row = blockIdx.x;
  const int64_t base = row * p.padded_vocab;
  const int32_t y = p.targets[row];
  const bool has_dlogits = p.dlogits.data != nullptr;
  const float dlogits_scale = write_scale(p.dlogits);
  Fp8Tally tally;
  Fp8Tally* tally_ptr = p.dlogits.scaling ? &tally : nullptr;
  float x[kChunk];

  if (y == -1) {
    if (threadIdx.x == 0) p.losses[row] = 0.0f;
    if (has_dlogits) {
      const float zeros[kChunk] = {};
      for (int64_t j = threadIdx.x; j * kChunk < p.padded_vocab; j += blockDim.x)
        store_chunk(p.dlogits, base + j * kChunk, chunk_elements(p.padded_vocab, j), p.vector, zeros, dlogits_scale,
                    tally_ptr);
    }
    flush_fp8_tally(p.dlogits.scaling, tally);
    return;
  }
  const bool valid = y >= 0 && y < p.vocab;
  if (!valid && p.errors && threadIdx.x == 0)
    record_bad_input(&p.errors->first_target, &p.errors->target_bound, row, y, p.vocab);
  const float scale_inv = read_scale_inv(p.logits);
  const float x_y = valid ? load(p.logits, base + y, scale_inv) : NAN;

  const int64_t chunks = (p.vocab + kChunk - 1) / kChunk;
  Normaliser part{-INFINITY, 0.0f};
  for (int64_t j = threadIdx.x; j < chunks; j += blockDim.x) {
    const int n = chunk_elements(p.vocab, j);
    load_chunk(p.logits, base + j * kChunk, n, p.vector, x, scale_inv);
    float chunk_max = x[0];
    for (int k = 1; k < n; ++k) chunk_max = fmaxf(chunk_max, x[k]);
    Normaliser c{chunk_max, 0.0f};
    for (int k = 0; k < n; ++k) c.sum += expf(x[k] - chunk_max);
    part = merge(part, c);
  }
  for (int offset = warpSize / 2; offset > 0; offset /= 2) {
    const Normaliser other{__shfl_xor_sync(0xFFFFFFFFu, part.max, offset), __shfl_xor_sync(0xFFFFFFFFu, part.sum, offset)};
    part = merge(part, other);
  }
  if (threadIdx.x % warpSize == 0) warp_totals[threadIdx.x / warpSize] = part;
  __syncthreads();
  Normaliser total = warp_totals[0];
  for (int w = 1; w < static_cast<int>(blockDim.x / warpSize); ++w) total = merge(total, warp_totals[w]);

  if (threadIdx.x == 0) p.losses[row] = valid ? logf(total.sum) + (total.max - x_y) : NAN;
  if (!has_dlogits) return;
  const float inv_sum = valid ? 1.0f / total.sum : NAN;
  for (int64_t j = threadIdx.x; j * kChunk < p.padded_vocab; j += blockDim.x) {
    const int n = chunk_elements(p.padded_vocab, j);
    const int64_t left = p.vocab - j * kChunk;  // columns of the chunk inside the vocabulary
    const int in_vocab = left <= 0 ? 0 : left < n ? static_cast<int>(left) : n;
    load_chunk(p.logits, base + j * kChunk, in_vocab, p.vector, x, scale_inv);
    for (int k = 0; k < kChunk; ++k) {
      const int64_t col = j * kChunk + k;
      x[k] = k < in_vocab ? (expf(x[k] - total.max) * inv_sum - (col == y ? 1.0f : 0.0f)) * p.dloss : 0.0f;
    }
    store_chunk(p.dlogits, base + j * kChunk, n, p.vector, x, dlogits_scale, tally_ptr);
  }
  flush_fp8_tally(p.dlogits.scaling, tally);
}

}  // namespace

void cross_entropy(const CrossEntropyArgs& args, const DeviceContext& ctx) {
  const Tensor& logits = args.logits;
  const auto [rows, padded_vocab] = check_cross_entropy(args);
  GPT_CHECK(args.losses.dtype == DType::F32, "cross_entropy: losses must be f32 on the cuda backend, got {}",
            dtype_name(args.losses.dtype));
  GPT_CHECK(args.dlogits.empty() || args.dlogits.data != logits.data || args.dlogits.dtype == logits.dtype,
            "cross_entropy: dlogits aliases logits, so it must have their format ({}), not {}", dtype_name(logits.dtype),
            dtype_name(args.dlogits.dtype));
  check_row_formats("cross_entropy", {&args.logits, &args.dlogits});
  if (rows == 0) return;
  GPT_CHECK(rows <= 0x7FFFFFFF, "cross_entropy: {} rows are too many for one grid", rows);
  const Params p{args.losses.as<float>(),
                 tensor_ref(args.dlogits),
                 tensor_ref(logits),
                 args.targets.as<int32_t>(),
                 padded_vocab,
                 args.vocab_size,
                 args.dloss,
                 chunk_aligned(logits, padded_vocab) && chunk_aligned(args.dlogits, padded_vocab),
                 ctx.input_errors};
  launch<cross_entropy_kernel>(dim3(static_cast<unsigned>(rows)), dim3(row_block_threads(args.vocab_size, kMaxThreads)), 0,
                               ctx.stream, p);
}

}  // namespace gpt::cuda
