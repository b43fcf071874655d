#include "backend/op_traffic.h"

#include <algorithm>

namespace gpt {
namespace {

// An optional tensor's bytes: 0 where it is not given.
uint64_t bytes(const Tensor& t) { return t.empty() ? 0 : t.bytes(); }
// A tensor read and written (an accumulated gradient, updated state, scratch written and read back).
uint64_t twice(const Tensor& t) { return 2 * bytes(t); }
// `rows` rows of a [rows_total, C] table, C its last dimension.
uint64_t table_rows(const Tensor& table, int64_t rows) {
  if (table.empty() || table.ndim < 1) return 0;
  return static_cast<uint64_t>(rows) * static_cast<uint64_t>(table.dim(-1)) * dtype_size(table.dtype);
}

// A conversion's output and input, and the running amax and counts it adds to.
template <class Conversion>
uint64_t conversion_traffic(const Conversion& a) {
  return bytes(a.out) + bytes(a.in) + twice(a.amax) + twice(a.counts);
}

}  // namespace

uint64_t op_traffic_bytes(const FillArgs& a) { return bytes(a.out); }
uint64_t op_traffic_bytes(const CopyArgs& a) { return bytes(a.out) + bytes(a.in); }

uint64_t op_traffic_bytes(const MatmulArgs& a) {
  return bytes(a.a) + bytes(a.b) + bytes(a.bias) + (a.beta != 0.0f ? twice(a.out) : bytes(a.out));
}

uint64_t op_traffic_bytes(const BiasBackwardArgs& a) { return twice(a.dbias) + bytes(a.dout); }

uint64_t op_traffic_bytes(const LayerNormForwardArgs& a) {
  return bytes(a.out) + bytes(a.mean) + bytes(a.rstd) + bytes(a.in) + bytes(a.weight) + bytes(a.bias);
}

uint64_t op_traffic_bytes(const LayerNormBackwardArgs& a) {
  return twice(a.din) + twice(a.dweight) + twice(a.dbias) + bytes(a.dout) + bytes(a.in) + bytes(a.weight) +
         bytes(a.mean) + bytes(a.rstd);
}

// The sum is written once and normalised from where it is computed: norm.in (residual.out) is not read.
uint64_t op_traffic_bytes(const ResidualLayerNormForwardArgs& a) {
  return op_traffic_bytes(a.residual) + op_traffic_bytes(a.norm) - bytes(a.norm.in);
}

// The branch's gradient is taken from the stream's as it is updated: residual.dout (norm.din) is not read.
uint64_t op_traffic_bytes(const LayerNormResidualBackwardArgs& a) {
  return op_traffic_bytes(a.norm) + op_traffic_bytes(a.residual) - bytes(a.residual.dout);
}

// probs is what the forward keeps: the [B,NH,T,T] probabilities of a materialised attention, or the [B,NH,T]
// log-sum-exps of a fused one, so the count is each path's own.
uint64_t op_traffic_bytes(const AttentionForwardArgs& a) { return bytes(a.out) + bytes(a.probs) + bytes(a.qkv); }

uint64_t op_traffic_bytes(const AttentionBackwardArgs& a) {
  return bytes(a.dqkv) + twice(a.dprobs) + bytes(a.dout) + bytes(a.qkv) + bytes(a.probs) + bytes(a.out);
}

// The position's q, k and v are read and its key and value written into the cache, then every head reads
// `length` rows of its keys and values, and writes and reads `length` scores.
uint64_t op_traffic_bytes(const AttentionDecodeArgs& a) {
  const int64_t heads = a.k_cache.ndim >= 3 ? a.k_cache.dim(0) : 1;
  const uint64_t row = table_rows(a.k_cache, 1) + table_rows(a.v_cache, 1);
  const uint64_t scores = a.scratch.empty() ? 0 : 2 * static_cast<uint64_t>(heads * a.length) * dtype_size(a.scratch.dtype);
  return bytes(a.out) + bytes(a.qkv) + static_cast<uint64_t>(heads) * row * static_cast<uint64_t>(a.length + 1) + scores;
}

uint64_t op_traffic_bytes(const SoftmaxForwardArgs& a) { return bytes(a.out) + bytes(a.in); }
uint64_t op_traffic_bytes(const SoftmaxBackwardArgs& a) { return bytes(a.din) + bytes(a.dout) + bytes(a.out); }
uint64_t op_traffic_bytes(const GeluForwardArgs& a) { return bytes(a.out) + bytes(a.in); }
uint64_t op_traffic_bytes(const GeluBackwardArgs& a) { return bytes(a.din) + bytes(a.dout) + bytes(a.in); }
uint64_t op_traffic_bytes(const ResidualForwardArgs& a) { return bytes(a.out) + bytes(a.residual) + bytes(a.x); }
uint64_t op_traffic_bytes(const ResidualBackwardArgs& a) { return bytes(a.dx) + bytes(a.dout); }

// One wte row per token and the wpe rows of the T positions.
uint64_t op_traffic_bytes(const EmbeddingForwardArgs& a) {
  const int64_t tokens = a.tokens.numel(), positions = a.tokens.ndim >= 1 ? a.tokens.dim(-1) : 0;
  return bytes(a.out) + bytes(a.tokens) + table_rows(a.wte, tokens) + table_rows(a.wpe, positions);
}

// One dwte row per token, at most every row of the table (a kernel that does not know which tokens repeat
// reads and writes a repeated token's row each time), and the T rows of dwpe, each read and written.
uint64_t op_traffic_bytes(const EmbeddingBackwardArgs& a) {
  const int64_t tokens = a.tokens.numel(), positions = a.tokens.ndim >= 1 ? a.tokens.dim(-1) : 0;
  const int64_t table = a.dwte.ndim >= 1 ? a.dwte.dim(0) : 0;
  return bytes(a.dout) + bytes(a.tokens) + 2 * table_rows(a.dwte, std::min(tokens, table)) +
         2 * table_rows(a.dwpe, positions);
}

// dlogits may alias logits (written over them): then the logits are read once and written once.
uint64_t op_traffic_bytes(const CrossEntropyArgs& a) {
  return bytes(a.losses) + bytes(a.dlogits) + bytes(a.logits) + bytes(a.targets);
}

uint64_t op_traffic_bytes(const AdamWArgs& a) {
  return twice(a.params) + bytes(a.grads) + twice(a.m) + twice(a.v) + bytes(a.compute);
}
uint64_t op_traffic_bytes(const SumOfSquaresArgs& a) { return bytes(a.out) + bytes(a.in); }

uint64_t op_traffic_bytes(const CastArgs& a) { return conversion_traffic(a); }

uint64_t op_traffic_bytes(const AmaxArgs& a) { return (a.accumulate ? twice(a.out) : bytes(a.out)) + bytes(a.in); }

uint64_t op_traffic_bytes(const QuantizeRoundtripArgs& a) { return conversion_traffic(a); }

uint64_t op_traffic_bytes(const Fp8CurrentScaleArgs& a) { return bytes(a.in); }

}  // namespace gpt
