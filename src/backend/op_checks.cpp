#include "backend/op_checks.h"

#include "core/error.h"

#include <cmath>

namespace gpt {
namespace {

bool is_wide_float(DType t) { return t == DType::F32 || t == DType::F64; }

void check_same_shape(const Tensor& a, const Tensor& b, const char* what) {
  GPT_CHECK(a.ndim == b.ndim && a.numel() == b.numel() && a.dim(-1) == b.dim(-1),
            "softmax: {} has shape {}, expected {}", what, a.shape_string(), b.shape_string());
}

// The shapes LayerNorm's forward and backward share.
RowShape layernorm_shape(const char* op, const Tensor& in, const Tensor& weight, const Tensor& mean, const Tensor& rstd) {
  GPT_CHECK(!in.empty() && in.ndim >= 1, "{}: in must be given", op);
  const int64_t c = in.dim(-1);
  GPT_CHECK(c > 0, "{}: in {} has no channels", op, in.shape_string());
  const int64_t n = in.numel() / c;
  GPT_CHECK(!weight.empty() && weight.numel() == c, "{}: weight {} should have {} elements (the channels of in {})", op,
            weight.shape_string(), c, in.shape_string());
  GPT_CHECK(!mean.empty() && mean.numel() == n, "{}: mean {} should have {} elements (one per row)", op, mean.shape_string(), n);
  GPT_CHECK(!rstd.empty() && rstd.numel() == n, "{}: rstd {} should have {} elements (one per row)", op, rstd.shape_string(), n);
  return {n, c};
}

AttentionDims attention_dims(const Tensor& qkv, const Tensor& out, const Tensor& probs, int n_head, const char* op) {
  const AttentionDims d = check_attention_operands(op, qkv, out, n_head);
  GPT_CHECK(probs.ndim == 4 && probs.dim(0) == d.batch && probs.dim(1) == d.heads && probs.dim(2) == d.seq &&
                probs.dim(3) == d.seq,
            "{}: probs must be ({},{},{},{}), got {}", op, d.batch, d.heads, d.seq, d.seq, probs.shape_string());
  return d;
}

void check_scale(float scale, const char* op) {
  GPT_CHECK(std::isfinite(scale) && scale > 0.0f, "{}: scale must be finite and > 0, got {}", op, scale);
}

void check_amax_output(const Tensor& out, const char* op) {
  GPT_CHECK(out.numel() == 1 && is_wide_float(out.dtype), "{}: amax output {} {} must be one f32 or f64 element", op,
            dtype_name(out.dtype), out.shape_string());
}

}  // namespace

void check_gelu_forward(const GeluForwardArgs& args) {
  GPT_CHECK(!args.out.empty() && !args.in.empty(), "gelu_forward: out and in must be given");
  GPT_CHECK(args.out.numel() == args.in.numel(), "gelu_forward: out {} should match in {}", args.out.shape_string(),
            args.in.shape_string());
}

void check_gelu_backward(const GeluBackwardArgs& args) {
  GPT_CHECK(!args.din.empty() && !args.dout.empty() && !args.in.empty(), "gelu_backward: din, dout and in must be given");
  GPT_CHECK(args.din.numel() == args.in.numel() && args.dout.numel() == args.in.numel(),
            "gelu_backward: din {} and dout {} should match in {}", args.din.shape_string(), args.dout.shape_string(),
            args.in.shape_string());
}

void check_residual_forward(const ResidualForwardArgs& args) {
  GPT_CHECK(!args.out.empty() && !args.residual.empty() && !args.x.empty(), "residual_forward: out, residual and x must be given");
  GPT_CHECK(args.out.numel() == args.x.numel() && args.residual.numel() == args.x.numel(),
            "residual_forward: out {}, residual {} and x {} should have one element count", args.out.shape_string(),
            args.residual.shape_string(), args.x.shape_string());
}

void check_residual_backward(const ResidualBackwardArgs& args) {
  GPT_CHECK(!args.dx.empty() && !args.dout.empty(), "residual_backward: dx and dout must be given");
  GPT_CHECK(args.dx.numel() == args.dout.numel(), "residual_backward: dx {} should match dout {}", args.dx.shape_string(),
            args.dout.shape_string());
}

DecodeShape check_attention_decode(const AttentionDecodeArgs& args) {
  GPT_CHECK(!args.out.empty() && !args.qkv.empty() && !args.k_cache.empty() && !args.v_cache.empty() &&
                !args.scratch.empty(),
            "attention_decode: out, qkv, k_cache, v_cache and scratch are required");
  GPT_CHECK(args.k_cache.ndim == 3, "attention_decode: k_cache {} should be [NH, capacity, hs]",
            args.k_cache.shape_string());
  check_same_shape(args.v_cache, args.k_cache, "v_cache");
  const DecodeShape s{args.k_cache.dim(0), args.k_cache.dim(1), args.k_cache.dim(2)};
  const int64_t C = s.heads * s.head_size;
  GPT_CHECK(args.out.numel() == C, "attention_decode: out {} should have NH x hs = {} elements",
            args.out.shape_string(), C);
  GPT_CHECK(args.qkv.numel() == 3 * C, "attention_decode: qkv {} should have 3 x NH x hs = {} elements",
            args.qkv.shape_string(), 3 * C);
  GPT_CHECK(args.k_cache.dtype == args.qkv.dtype && args.v_cache.dtype == args.qkv.dtype,
            "attention_decode: the caches ({}, {}) should be in qkv's format ({})", dtype_name(args.k_cache.dtype),
            dtype_name(args.v_cache.dtype), dtype_name(args.qkv.dtype));
  GPT_CHECK(args.qkv.dtype == DType::F32 || args.qkv.dtype == DType::BF16 || args.qkv.dtype == DType::F16,
            "attention_decode: qkv and the caches are {}; they take F32, BF16 or F16 (a cache keeps no FP8 scale)",
            dtype_name(args.qkv.dtype));
  GPT_CHECK((args.scratch.dtype == DType::F32 || args.scratch.dtype == DType::F64) && args.scratch.ndim == 2 &&
                args.scratch.dim(0) == s.heads && args.scratch.dim(1) == s.capacity,
            "attention_decode: scratch {} {} should be F32 (or F64) [NH, capacity] = [{}, {}]",
            args.scratch.shape_string(), dtype_name(args.scratch.dtype), s.heads, s.capacity);
  GPT_CHECK(args.length >= 1 && args.length <= s.capacity,
            "attention_decode: length {} outside [1, {}] (the cache's capacity)", args.length, s.capacity);
  return s;
}

RowShape check_softmax_forward(const SoftmaxForwardArgs& args) {
  GPT_CHECK(!args.in.empty() && !args.out.empty() && args.in.ndim >= 1, "softmax_forward: in and out are required");
  check_same_shape(args.out, args.in, "out");
  const int64_t cols = args.in.dim(-1);
  GPT_CHECK(cols > 0, "softmax_forward: empty last dimension in shape {}", args.in.shape_string());
  return {args.in.numel() / cols, cols};
}

RowShape check_softmax_backward(const SoftmaxBackwardArgs& args) {
  GPT_CHECK(!args.din.empty() && !args.dout.empty() && !args.out.empty() && args.out.ndim >= 1,
            "softmax_backward: din, dout and out are required");
  check_same_shape(args.din, args.out, "din");
  check_same_shape(args.dout, args.out, "dout");
  const int64_t cols = args.out.dim(-1);
  GPT_CHECK(cols > 0, "softmax_backward: empty last dimension in shape {}", args.out.shape_string());
  return {args.out.numel() / cols, cols};
}

RowShape check_layernorm_forward(const LayerNormForwardArgs& args, const char* op) {
  const RowShape s = layernorm_shape(op, args.in, args.weight, args.mean, args.rstd);
  GPT_CHECK(!args.bias.empty() && args.bias.numel() == s.cols, "{}: bias {} should have {} elements", op,
            args.bias.shape_string(), s.cols);
  GPT_CHECK(!args.out.empty() && args.out.numel() == args.in.numel(), "{}: out {} should match in {}", op,
            args.out.shape_string(), args.in.shape_string());
  return s;
}

RowShape check_layernorm_backward(const LayerNormBackwardArgs& args, const char* op) {
  const RowShape s = layernorm_shape(op, args.in, args.weight, args.mean, args.rstd);
  GPT_CHECK(!args.dweight.empty() && args.dweight.numel() == s.cols, "{}: dweight {} should have {} elements", op,
            args.dweight.shape_string(), s.cols);
  GPT_CHECK(!args.dbias.empty() && args.dbias.numel() == s.cols, "{}: dbias {} should have {} elements", op,
            args.dbias.shape_string(), s.cols);
  GPT_CHECK(!args.din.empty() && args.din.numel() == args.in.numel(), "{}: din {} should match in {}", op,
            args.din.shape_string(), args.in.shape_string());
  GPT_CHECK(!args.dout.empty() && args.dout.numel() == args.in.numel(), "{}: dout {} should match in {}", op,
            args.dout.shape_string(), args.in.shape_string());
  return s;
}

AttentionDims check_attention_operands(const char* op, const Tensor& qkv, const Tensor& out, int n_head) {
  GPT_CHECK(qkv.ndim == 3 && qkv.dim(2) % 3 == 0, "{}: qkv must be [B,T,3C], got {}", op, qkv.shape_string());
  AttentionDims d{qkv.dim(0), qkv.dim(1), qkv.dim(2) / 3, n_head, 0};
  GPT_CHECK(n_head > 0 && d.channels % n_head == 0, "{}: n_head {} does not divide C = {}", op, n_head, d.channels);
  d.head_size = d.channels / n_head;
  GPT_CHECK(out.ndim == 3 && out.dim(0) == d.batch && out.dim(1) == d.seq && out.dim(2) == d.channels,
            "{}: out must be ({},{},{}), got {}", op, d.batch, d.seq, d.channels, out.shape_string());
  return d;
}

AttentionDims check_attention_forward(const AttentionForwardArgs& args) {
  return attention_dims(args.qkv, args.out, args.probs, args.n_head, "attention_forward");
}

AttentionDims check_attention_backward(const AttentionBackwardArgs& args) {
  const AttentionDims d = attention_dims(args.qkv, args.dout, args.probs, args.n_head, "attention_backward");
  GPT_CHECK(args.dqkv.ndim == 3 && args.dqkv.numel() == args.qkv.numel(), "attention_backward: dqkv must be {}, got {}",
            args.qkv.shape_string(), args.dqkv.shape_string());
  GPT_CHECK(args.dprobs.numel() == args.probs.numel(), "attention_backward: dprobs must be {}, got {}",
            args.probs.shape_string(), args.dprobs.shape_string());
  return d;
}

EmbeddingDims check_embedding(const char* op, const Tensor& x, const Tensor& tokens, const Tensor& wte, const Tensor& wpe,
                              const char* x_name) {
  GPT_CHECK(!tokens.empty() && tokens.ndim == 2, "{}: tokens must be [B,T], got {}", op, tokens.shape_string());
  GPT_CHECK(tokens.dtype == DType::I32, "{}: tokens must be i32, got {}", op, dtype_name(tokens.dtype));
  GPT_CHECK(!wte.empty() && wte.ndim == 2, "{}: wte must be [Vp,C], got {}", op, wte.shape_string());
  GPT_CHECK(!wpe.empty() && wpe.ndim == 2, "{}: wpe must be [maxT,C], got {}", op, wpe.shape_string());
  const EmbeddingDims s{tokens.dim(0), tokens.dim(1), wte.dim(1), wte.dim(0)};
  GPT_CHECK(wpe.dim(1) == s.c, "{}: wte {} and wpe {} differ in channels", op, wte.shape_string(), wpe.shape_string());
  GPT_CHECK(s.t <= wpe.dim(0), "{}: sequence length {} exceeds the {} positions of wpe", op, s.t, wpe.dim(0));
  GPT_CHECK(!x.empty() && x.ndim >= 1 && x.dim(-1) == s.c && x.numel() == s.b * s.t * s.c, "{}: {} {} should be [{},{},{}]",
            op, x_name, x.shape_string(), s.b, s.t, s.c);
  return s;
}

CrossEntropyShape check_cross_entropy(const CrossEntropyArgs& args) {
  const Tensor& logits = args.logits;
  GPT_CHECK(!logits.empty() && logits.ndim == 2, "cross_entropy: logits must be [N,Vp], got {}", logits.shape_string());
  const CrossEntropyShape s{logits.dim(0), logits.dim(1)};
  GPT_CHECK(args.vocab_size > 0 && args.vocab_size <= s.padded_vocab, "cross_entropy: vocab_size {} must be in [1, {}]",
            args.vocab_size, s.padded_vocab);
  GPT_CHECK(args.targets.dtype == DType::I32 && args.targets.numel() == s.rows,
            "cross_entropy: targets must be [{}] i32, got {} {}", s.rows, args.targets.shape_string(),
            dtype_name(args.targets.dtype));
  GPT_CHECK(!args.losses.empty() && args.losses.numel() == s.rows, "cross_entropy: losses must be [{}], got {}", s.rows,
            args.losses.shape_string());
  if (!args.dlogits.empty()) {
    GPT_CHECK(args.dlogits.ndim == 2 && args.dlogits.dim(0) == s.rows && args.dlogits.dim(1) == s.padded_vocab,
              "cross_entropy: dlogits must be {}, got {}", logits.shape_string(), args.dlogits.shape_string());
  }
  return s;
}

int64_t check_adamw(const AdamWArgs& args) {
  GPT_CHECK(!args.params.empty() && !args.grads.empty() && !args.m.empty() && !args.v.empty(),
            "adamw_update: params, grads, m and v are required");
  const int64_t n = args.params.numel();
  GPT_CHECK(args.grads.numel() == n && args.m.numel() == n && args.v.numel() == n,
            "adamw_update: element counts differ: params {}, grads {}, m {}, v {}", n, args.grads.numel(),
            args.m.numel(), args.v.numel());
  GPT_CHECK(args.step >= 1, "adamw_update: step must be >= 1, got {}", args.step);
  if (!args.compute.empty()) {
    GPT_CHECK(args.compute.numel() == n, "adamw_update: compute {} should have the {} elements of params",
              args.compute.shape_string(), n);
    GPT_CHECK((args.compute.dtype == DType::BF16 || args.compute.dtype == DType::F16) && !args.compute.scaling,
              "adamw_update: the compute copy is {}{}; the update writes bf16 or f16 copies (an FP8 weight is cast "
              "with the scale its forward chooses)",
              dtype_name(args.compute.dtype), args.compute.scaling ? " with FP8 scaling" : "");
  }
  return n;
}

void check_sum_of_squares(const SumOfSquaresArgs& args) {
  GPT_CHECK(!args.in.empty(), "sum_of_squares: in must be given");
  GPT_CHECK(!args.out.empty() && args.out.numel() == 1, "sum_of_squares: out {} must hold one element", args.out.shape_string());
}

int64_t check_bias_backward(const BiasBackwardArgs& args) {
  GPT_CHECK(!args.dbias.empty() && !args.dout.empty() && args.dout.ndim >= 1, "bias_backward: dbias and dout must be given");
  const int64_t n = args.dout.dim(-1);
  GPT_CHECK(args.dbias.numel() == n, "bias_backward: dbias {} should have {} elements (the columns of dout {})",
            args.dbias.shape_string(), n, args.dout.shape_string());
  return n;
}

void check_cast(const CastArgs& args) {
  GPT_CHECK(!args.in.empty() && !args.out.empty(), "cast: in and out must both be given");
  GPT_CHECK(args.in.numel() == args.out.numel(), "cast: in {} and out {} differ in element count", args.in.shape_string(),
            args.out.shape_string());
  check_scale(args.scale, "cast");
}

void check_amax(const AmaxArgs& args) {
  GPT_CHECK(!args.in.empty() && !args.out.empty(), "amax: in and out must both be given");
  check_amax_output(args.out, "amax");
}

void check_quantize_roundtrip(const QuantizeRoundtripArgs& args) {
  const Tensor& in = args.in;
  const Tensor& out = args.out;
  GPT_CHECK(!in.empty() && !out.empty(), "quantize_roundtrip: in and out must both be given");
  GPT_CHECK(in.numel() == out.numel(), "quantize_roundtrip: in {} and out {} differ in element count", in.shape_string(),
            out.shape_string());
  GPT_CHECK(is_wide_float(in.dtype) && out.dtype == in.dtype,
            "quantize_roundtrip: in and out must both be f32 or f64, got {} and {}", dtype_name(in.dtype),
            dtype_name(out.dtype));
  check_scale(args.scale, "quantize_roundtrip");
  check_stats_outputs(args.amax, args.counts, "quantize_roundtrip");
}

void check_fp8_current_scale(const Fp8CurrentScaleArgs& args) {
  GPT_CHECK(!args.in.empty() && args.scaling != nullptr, "fp8_current_scale: in and scaling must be given");
  GPT_CHECK(args.format == DType::E4M3 || args.format == DType::E5M2, "fp8_current_scale: format must be e4m3 or e5m2, got {}",
            dtype_name(args.format));
}

void check_stats_outputs(const Tensor& amax, const Tensor& counts, const char* op) {
  if (!amax.empty()) check_amax_output(amax, op);
  if (!counts.empty()) {
    GPT_CHECK(counts.dtype == DType::I32 && counts.numel() == 2, "{}: counts {} {} must be two i32 elements", op,
              dtype_name(counts.dtype), counts.shape_string());
  }
}

}  // namespace gpt
