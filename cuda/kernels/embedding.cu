// Token + position embedding with dropout on the sum, as src/cpu/embedding.cpp. tokens [B,T] i32 on the
// device, wte [Vp,C], wpe [maxT,C], out [B,T,C] (any shape of B*T*C elements with last dimension C):
//   out[b,t,c] = keep(i) * (wte[tokens[b,t],c] + wpe[t,c]) / (1-p),  i = (b*T + t)*C + c,
// with the CPU's Philox mask (dropout_chunk.cuh), so both backends drop the same elements.
// Backward, with g = keep(i) * dout[b,t,c] / (1-p): dwte[tokens[b,t],c] += g, dwpe[t,c] += g.
// Each tensor is read and written in its own format, 8-element chunks (row_chunks.cuh), FP32 sums.
// Tokens outside [0, Vp) cannot be refused from the host (they live on the device): forward writes a NaN
// row for them, which the loss then shows, and backward leaves them out of dwte.
//
// Forward: one thread per chunk of a row; nothing else is fused.
// Backward, deterministic without float atomics (llm.c buckets the tokens on the host; here the tokens
// are on the device, so the buckets are built there, in ctx.scratch):
//   1. counts[v] = occurrences of token v (integer atomics: exact in any order);
//   2. offsets = exclusive prefix sum of counts (one block); offsets[Vp] = the positions bucketed;
//   3. each position appends itself to its token's bucket (an integer atomic cursor: any order);
//   4. each position finds its rank in its bucket (how many of the bucket's positions are smaller) and
//      moves to that slot, so every bucket lists its positions in increasing order whatever order 3 gave;
//   5. one warp per bucket (the slot that starts it), lanes over channel chunks, adds g of the bucket's
//      positions to dwte's row in that order, in an FP32 accumulator that starts from dwte's value and is
//      stored once: the CPU's order and roundings (add_kept);
//   6. one thread per (t, chunk) adds g over b = 0..B-1 in order to dwpe the same way.
// Step 4 costs the sum of the squared bucket sizes: negligible for text, quadratic if one token filled
// the whole micro-batch (B*T = 16K: 2.7e8 integer compares; estimated at milliseconds, not measured).
#include "kernels/embedding.h"

#include "backend/op_checks.h"
#include "common/cuda_check.h"
#include "common/dropout_chunk.cuh"
#include "common/input_errors.cuh"
#include "common/launch.cuh"
#include "common/row_chunks.cuh"

#include <algorithm>

namespace gpt::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kScanThreads = 1024;

using Shape = EmbeddingDims;

__device__ __forceinline__ bool valid_token(int32_t tok, int64_t vocab) { return tok >= 0 && tok < vocab; }

// acc + g for a kept element with g = dy / (1-p), in the CPU's arithmetic: g and the sum in double, one
// rounding to FP32 (without dropout that is FP32's own add). The accumulator stays FP32 and every add
// rounds to it, in position order, as the CPU's loop does; a sum first and one add at the end would round
// differently, and with FP8 gradients exact cancellations there would change which values underflow.
__device__ __forceinline__ float add_kept(float acc, float dy, const DropoutRule& dropout) {
  return dropout.active ? static_cast<float>(static_cast<double>(acc) + static_cast<double>(dy) * dropout.scale)
                        : acc + dy;
}

__global__ void __launch_bounds__(kThreads) embedding_forward_kernel(TensorRef out, const int32_t* tokens, TensorRef wte,
                                                                     TensorRef wpe, Shape s, DropoutRule dropout,
                                                                     bool vector, InputErrors* errors) {
  const int64_t chunks_per_row = (s.c + kChunk - 1) / kChunk;
  const int64_t total = s.b * s.t * chunks_per_row;
  const float wte_scale_inv = read_scale_inv(wte), wpe_scale_inv = read_scale_inv(wpe);
  const float out_scale = write_scale(out);
  Fp8Tally tally;
  Fp8Tally* tally_ptr = out.scaling ? &tally : nullptr;
  float te[kChunk], pe[kChunk];
  bool keep[kChunk];
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t row = idx / chunks_per_row, j = idx % chunks_per_row;
    const int64_t col = j * kChunk;
    const int n = chunk_elements(s.c, j);
    const int32_t tok = tokens[row];
    if (!valid_token(tok, s.vocab)) {
      if (errors && j == 0) record_bad_input(&errors->first_token, &errors->token_bound, row, tok, s.vocab);
      for (int k = 0; k < kChunk; ++k) te[k] = NAN;
      store_chunk(out, row * s.c + col, n, vector, te, out_scale, tally_ptr);
      continue;
    }
    load_chunk(wte, tok * s.c + col, n, vector, te, wte_scale_inv);
    load_chunk(wpe, (row % s.t) * s.c + col, n, vector, pe, wpe_scale_inv);
    dropout_keep(dropout, static_cast<uint64_t>(row * s.c + col), keep);
    // (wte + wpe) / (1-p) in double with one rounding, as the CPU computes it.
    for (int k = 0; k < kChunk; ++k) {
      te[k] = !keep[k]         ? 0.0f
              : dropout.active ? static_cast<float>((static_cast<double>(te[k]) + pe[k]) * dropout.scale)
                               : te[k] + pe[k];
    }
    store_chunk(out, row * s.c + col, n, vector, te, out_scale, tally_ptr);
  }
  flush_fp8_tally(out.scaling, tally);
}

// The token buckets in ctx.scratch, all int32.
struct Buckets {
  int32_t* counts;     // [vocab]: occurrences, then the append cursor of step 3
  int32_t* offsets;    // [vocab + 1]: where each token's bucket starts
  int32_t* appended;   // [positions]: the buckets in step 3's order
  int32_t* sorted;     // [positions]: each bucket in increasing position order
};

__global__ void __launch_bounds__(kThreads) count_tokens_kernel(Buckets buckets, const int32_t* tokens, int64_t positions,
                                                                int64_t vocab) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < positions && valid_token(tokens[i], vocab)) atomicAdd(&buckets.counts[tokens[i]], 1);
}

// One block: thread t scans its contiguous segment of the vocabulary after thread 0 has added up the
// segments before it. Zeroes counts for the append cursor.
__global__ void __launch_bounds__(kScanThreads) bucket_offsets_kernel(Buckets buckets, int64_t vocab) {
  __shared__ int32_t segment_start[kScanThreads];
  const int64_t per_thread = (vocab + blockDim.x - 1) / blockDim.x;
  const int64_t lo = threadIdx.x * per_thread < vocab ? threadIdx.x * per_thread : vocab;
  const int64_t hi = lo + per_thread < vocab ? lo + per_thread : vocab;
  int32_t sum = 0;
  for (int64_t v = lo; v < hi; ++v) sum += buckets.counts[v];
  segment_start[threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.x == 0) {
    int32_t running = 0;
    for (unsigned t = 0; t < blockDim.x; ++t) {
      const int32_t size = segment_start[t];
      segment_start[t] = running;
      running += size;
    }
    buckets.offsets[vocab] = running;
  }
  __syncthreads();
  int32_t running = segment_start[threadIdx.x];
  for (int64_t v = lo; v < hi; ++v) {
    buckets.offsets[v] = running;
    running += buckets.counts[v];
    buckets.counts[v] = 0;
  }
}

__global__ void __launch_bounds__(kThreads) append_positions_kernel(Buckets buckets, const int32_t* tokens, int64_t positions,
                                                                    int64_t vocab) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= positions || !valid_token(tokens[i], vocab)) return;
  const int32_t tok = tokens[i];
  buckets.appended[buckets.offsets[tok] + atomicAdd(&buckets.counts[tok], 1)] = static_cast<int32_t>(i);
}

__global__ void __launch_bounds__(kThreads) order_buckets_kernel(Buckets buckets, const int32_t* tokens, int64_t positions,
                                                                 int64_t vocab) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= positions || !valid_token(tokens[i], vocab)) return;
  const int32_t tok = tokens[i];
  const int32_t start = buckets.offsets[tok], end = buckets.offsets[tok + 1];
  int32_t rank = 0;
  for (int32_t q = start; q < end; ++q) rank += buckets.appended[q] < i ? 1 : 0;
  buckets.sorted[start + rank] = static_cast<int32_t>(i);
}

__global__ void __launch_bounds__(kThreads) token_grads_kernel(TensorRef dwte, TensorRef dout, const int32_t* tokens,
                                                               Buckets buckets, Shape s, DropoutRule dropout, bool vector) {
  const int warps = blockDim.x / warpSize;
  const int64_t slot = static_cast<int64_t>(blockIdx.x) * warps + threadIdx.x / warpSize;
  const int lane = threadIdx.x % warpSize;
  // Positions of invalid tokens are in no bucket, so there may be fewer slots than positions.
  if (slot >= buckets.offsets[s.vocab]) return;
  const int32_t tok = tokens[buckets.sorted[slot]];
  const int32_t start = buckets.offsets[tok], end = buckets.offsets[tok + 1];
  if (slot != start) return;  // one warp per bucket: the one at its first slot
  const float dout_scale_inv = read_scale_inv(dout), dwte_scale_inv = read_scale_inv(dwte);
  const float dwte_scale = write_scale(dwte);
  Fp8Tally tally;
  Fp8Tally* tally_ptr = dwte.scaling ? &tally : nullptr;
  const int64_t chunks_per_row = (s.c + kChunk - 1) / kChunk;
  float acc[kChunk], dy[kChunk];
  bool keep[kChunk];
  for (int64_t j = lane; j < chunks_per_row; j += warpSize) {
    const int64_t col = j * kChunk;
    const int n = chunk_elements(s.c, j);
    load_chunk(dwte, tok * s.c + col, n, vector, acc, dwte_scale_inv);
    for (int32_t q = start; q < end; ++q) {
      const int64_t pos = buckets.sorted[q];
      load_chunk(dout, pos * s.c + col, n, vector, dy, dout_scale_inv);
      dropout_keep(dropout, static_cast<uint64_t>(pos * s.c + col), keep);
      for (int k = 0; k < kChunk; ++k) acc[k] = keep[k] ? add_kept(acc[k], dy[k], dropout) : acc[k];
    }
    store_chunk(dwte, tok * s.c + col, n, vector, acc, dwte_scale, tally_ptr);
  }
  flush_fp8_tally(dwte.scaling, tally);
}

__global__ void __launch_bounds__(kThreads) position_grads_kernel(TensorRef dwpe, TensorRef dout, Shape s,
                                                                  DropoutRule dropout, bool vector) {
  const int64_t chunks_per_row = (s.c + kChunk - 1) / kChunk;
  const int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  Fp8Tally tally;
  Fp8Tally* tally_ptr = dwpe.scaling ? &tally : nullptr;
  if (idx < s.t * chunks_per_row) {
    const int64_t t = idx / chunks_per_row, j = idx % chunks_per_row;
    const int64_t col = j * kChunk;
    const int n = chunk_elements(s.c, j);
    const float dout_scale_inv = read_scale_inv(dout);
    float acc[kChunk], dy[kChunk];
    bool keep[kChunk];
    load_chunk(dwpe, t * s.c + col, n, vector, acc, read_scale_inv(dwpe));
    for (int64_t b = 0; b < s.b; ++b) {
      const int64_t pos = b * s.t + t;
      load_chunk(dout, pos * s.c + col, n, vector, dy, dout_scale_inv);
      dropout_keep(dropout, static_cast<uint64_t>(pos * s.c + col), keep);
      for (int k = 0; k < kChunk; ++k) acc[k] = keep[k] ? add_kept(acc[k], dy[k], dropout) : acc[k];
    }
    store_chunk(dwpe, t * s.c + col, n, vector, acc, write_scale(dwpe), tally_ptr);
  }
  flush_fp8_tally(dwpe.scaling, tally);
}

Shape embedding_shape(const char* op, const Tensor& x, const Tensor& tokens, const Tensor& wte, const Tensor& wpe,
                      const char* x_name) {
  const Shape s = check_embedding(op, x, tokens, wte, wpe, x_name);
  GPT_CHECK(s.b * s.t < (int64_t{1} << 31) && s.vocab < (int64_t{1} << 31),
            "{}: {} positions and a vocabulary of {} do not fit the int32 buckets", op, s.b * s.t, s.vocab);
  return s;
}

unsigned grid_for(int64_t work, int64_t per_block) {
  return static_cast<unsigned>(std::clamp<int64_t>((work + per_block - 1) / per_block, 1, 0x7FFFFFFF));
}

}  // namespace

void embedding_forward(const EmbeddingForwardArgs& args, const DeviceContext& ctx) {
  const Shape s = embedding_shape("embedding_forward", args.out, args.tokens, args.wte, args.wpe, "out");
  check_row_formats("embedding_forward", {&args.out, &args.wte, &args.wpe});
  const DropoutRule dropout = dropout_rule(args.dropout);
  if (s.b * s.t == 0) return;
  const bool vector = chunk_aligned(args.out, s.c) && chunk_aligned(args.wte, s.c) && chunk_aligned(args.wpe, s.c);
  const int64_t chunks = s.b * s.t * ((s.c + kChunk - 1) / kChunk);
  launch<embedding_forward_kernel>(dim3(grid_for(chunks, kThreads)), dim3(kThreads), 0, ctx.stream, tensor_ref(args.out),
                                   args.tokens.as<int32_t>(), tensor_ref(args.wte), tensor_ref(args.wpe), s, dropout,
                                   vector, ctx.input_errors);
}

void embedding_backward(const EmbeddingBackwardArgs& args, const DeviceContext& ctx) {
  const Shape s = embedding_shape("embedding_backward", args.dout, args.tokens, args.dwte, args.dwpe, "dout");
  check_row_formats("embedding_backward", {&args.dwte, &args.dwpe, &args.dout});
  const DropoutRule dropout = dropout_rule(args.dropout);
  const int64_t positions = s.b * s.t;
  if (positions == 0) return;
  const size_t bucket_bytes = (2 * static_cast<size_t>(s.vocab) + 1 + 2 * static_cast<size_t>(positions)) * sizeof(int32_t);
  GPT_CHECK(bucket_bytes <= ctx.scratch_bytes,
            "embedding_backward: the token buckets of {} positions and a vocabulary of {} take {} bytes, more than the "
            "{} bytes of scratch",
            positions, s.vocab, bucket_bytes, ctx.scratch_bytes);
  auto* base = static_cast<int32_t*>(ctx.scratch);
  const Buckets buckets{base, base + s.vocab, base + 2 * s.vocab + 1, base + 2 * s.vocab + 1 + positions};
  const int32_t* tokens = args.tokens.as<int32_t>();
  const bool vector = chunk_aligned(args.dwte, s.c) && chunk_aligned(args.dwpe, s.c) && chunk_aligned(args.dout, s.c);

  CUDA_CHECK(cudaMemsetAsync(buckets.counts, 0, static_cast<size_t>(s.vocab) * sizeof(int32_t), ctx.stream));
  launch<count_tokens_kernel>(dim3(grid_for(positions, kThreads)), dim3(kThreads), 0, ctx.stream, buckets, tokens, positions,
                              s.vocab);
  launch<bucket_offsets_kernel>(dim3(1), dim3(kScanThreads), 0, ctx.stream, buckets, s.vocab);
  launch<append_positions_kernel>(dim3(grid_for(positions, kThreads)), dim3(kThreads), 0, ctx.stream, buckets, tokens,
                                  positions, s.vocab);
  launch<order_buckets_kernel>(dim3(grid_for(positions, kThreads)), dim3(kThreads), 0, ctx.stream, buckets, tokens, positions,
                               s.vocab);
  launch<token_grads_kernel>(dim3(grid_for(positions, kThreads / 32)), dim3(kThreads), 0, ctx.stream,
                             tensor_ref(args.dwte), tensor_ref(args.dout), tokens, buckets, s, dropout, vector);
  const int64_t position_chunks = s.t * ((s.c + kChunk - 1) / kChunk);
  launch<position_grads_kernel>(dim3(grid_for(position_chunks, kThreads)), dim3(kThreads), 0, ctx.stream,
                                tensor_ref(args.dwpe), tensor_ref(args.dout), s, dropout, vector);
}

}  // namespace gpt::cuda
