// Argument structs of the Backend ops. Every tensor is a view; shapes are checked by the ops.
// Conventions: row-major; N = rows (B*T), C = channels. Parameter gradients always accumulate (+=),
// so micro-batches add up without extra copies; activation gradients are overwritten unless a field
// says otherwise.
#pragma once

#include "core/philox.h"
#include "core/tensor.h"

#include <cstdint>

namespace gpt {

// Dropout with probability p drawn from a counter-based stream: the same spec regenerates the same mask.
struct DropoutSpec {
  float p = 0.0f;
  RngStream stream;
  bool active() const { return p > 0.0f; }
};

// out = value
struct FillArgs {
  Tensor out;
  float value = 0.0f;
};

// out = in (same element count and dtype)
struct CopyArgs {
  Tensor out;
  Tensor in;
};

// out[M,N] = alpha * op(a) op(b) + beta * out + bias[N]
// op(a) is [M,K]: a is stored [M,K], or [K,M] when trans_a. op(b) is [K,N]: b is [K,N], or [N,K] when
// trans_b. A linear layer with weight W[OC,IC] is matmul(out, x, W, bias, trans_b=true).
// Leading dimensions of a, b and out are folded: only the last dimension is a column.
struct MatmulArgs {
  Tensor out;
  Tensor a;
  Tensor b;
  Tensor bias;  // optional, [N]
  bool trans_a = false;
  bool trans_b = false;
  float alpha = 1.0f;
  float beta = 0.0f;
  // Bytes (U8) for the copies of the operands a backend with BackendCapabilities::stages_fp8_operands makes
  // before an FP8 product (backend/matmul_staging.h says how many); empty where none are needed. Its
  // contents are the product's working memory, undefined before and after.
  Tensor staging{};
};

// dbias[N] += sum over the rows of dout[M,N]
struct BiasBackwardArgs {
  Tensor dbias;
  Tensor dout;
};

// out = (in - mean) * rstd * weight + bias over the last dimension C; mean and rstd [N] are saved.
struct LayerNormForwardArgs {
  Tensor out;
  Tensor mean;
  Tensor rstd;
  Tensor in;
  Tensor weight;
  Tensor bias;
  float eps = 1e-5f;
};

// din += dL/din (the residual stream's gradient accumulates here); dweight += ..., dbias += ...
struct LayerNormBackwardArgs {
  Tensor din;
  Tensor dweight;
  Tensor dbias;
  Tensor dout;
  Tensor in;
  Tensor weight;
  Tensor mean;
  Tensor rstd;
};

// Causal multi-head self-attention. qkv [B,T,3C] holds q, k, v side by side, each C = n_head * hs with
// head h in columns [h*hs, (h+1)*hs). out [B,T,C] = concat_h(dropout(softmax(q k^T / sqrt(hs) + mask)) v).
// probs keeps what backward needs, F32, in one of two shapes (Backend::attention_keeps_probs says which
// the backend plans for; the CUDA backend takes either): [B,NH,T,T] the pre-dropout softmax (a
// materialised attention, the CPU's), or [B,NH,T] each query row's log-sum-exp of its scaled scores (a
// fused attention, which recomputes the probabilities from it).
struct AttentionForwardArgs {
  Tensor out;
  Tensor probs;
  Tensor qkv;
  int n_head = 1;
  DropoutSpec dropout;
};

// dqkv [B,T,3C] is overwritten; dprobs is scratch of probs' shape ([B,NH,T,T], or [B,NH,T] for a fused
// attention); out is the forward's output, which a fused backward reads (rowsum(dout * out)) and a
// materialised one ignores.
struct AttentionBackwardArgs {
  Tensor dqkv;
  Tensor dprobs;
  Tensor dout;
  Tensor qkv;
  Tensor probs;
  int n_head = 1;
  DropoutSpec dropout;
  Tensor out;
};

// One new position's causal attention over a KV cache, every head at once: the KV-cache decoder's
// attention (model/kv_cache_decoder.cpp). qkv [3C] holds the position's q, k and v as AttentionForwardArgs
// lays them out; k_cache and v_cache [NH, capacity, hs] are one layer's cache, in qkv's format. The op
// first writes the position's key and value into row length-1 of each head's cache, then per head h, over
// the positions j < length:
//   s_j = scale * q_h . k_h[j],   p = softmax(s),   out[h*hs + i] = sum_j p_j v_h[j][i]
// scratch [NH, capacity] F32 is the scores' and probabilities' working memory, undefined after.
struct AttentionDecodeArgs {
  Tensor out;
  Tensor qkv;
  Tensor k_cache;
  Tensor v_cache;
  Tensor scratch;
  int64_t length = 0;
  float scale = 1.0f;
};

// Row-wise softmax over the last dimension.
struct SoftmaxForwardArgs {
  Tensor out;
  Tensor in;
};

// din = out * (dout - sum(dout * out)) row-wise.
struct SoftmaxBackwardArgs {
  Tensor din;
  Tensor dout;
  Tensor out;
};

// GELU, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
struct GeluForwardArgs {
  Tensor out;
  Tensor in;
};

struct GeluBackwardArgs {
  Tensor din;
  Tensor dout;
  Tensor in;
};

// out = residual + dropout(x)
struct ResidualForwardArgs {
  Tensor out;
  Tensor residual;
  Tensor x;
  DropoutSpec dropout;
};

// The residual input's gradient is dout itself (the caller keeps using it); this gives the branch's:
// dx = dropout_mask * dout / (1 - p). dx may alias dout.
struct ResidualBackwardArgs {
  Tensor dx;
  Tensor dout;
  DropoutSpec dropout;
};

// The residual stream's add and the LayerNorm that reads it, in one op where the model's order has one
// right after the other (block_forward: Residual2 -> ln2, a block's output -> the next ln1 or lnf):
//   residual_forward(residual), then layernorm_forward(norm) with norm.in == residual.out,
// so the sum is written once and normalised as stored (rounded to its format), exactly as the two ops in
// turn give it; a backend may fuse them into one pass over the rows (cuda/kernels/layernorm.cu does).
struct ResidualLayerNormForwardArgs {
  ResidualForwardArgs residual;
  LayerNormForwardArgs norm;  // norm.in must be residual.out (one tensor: data, format, scaling)
};

// LayerNorm's backward into the residual stream's gradient, then the backward of the residual add below
// it (block_backward: ln2 -> the attention residual, ln1 -> the previous block's MLP residual, lnf ->
// the last block's MLP residual):
//   layernorm_backward(norm), then residual_backward(residual) with residual.dout == norm.din,
// so the branch's gradient is taken from the updated stream in the same pass. residual.dx must not
// alias norm.din, which the stream's gradient still needs; it may alias norm.dout (the model reuses one
// buffer for the branch gradients).
struct LayerNormResidualBackwardArgs {
  LayerNormBackwardArgs norm;
  ResidualBackwardArgs residual;  // residual.dout must be norm.din
};

// out[b,t,:] = dropout(wte[tokens[b,t],:] + wpe[t,:])
struct EmbeddingForwardArgs {
  Tensor out;
  Tensor tokens;  // [B,T] i32
  Tensor wte;     // [Vp,C]
  Tensor wpe;     // [maxT,C]
  DropoutSpec dropout;
};

// dwte[tokens[b,t],:] += g, dwpe[t,:] += g with g = dropout_backward(dout[b,t,:])
struct EmbeddingBackwardArgs {
  Tensor dwte;
  Tensor dwpe;
  Tensor dout;
  Tensor tokens;
  DropoutSpec dropout;
};

// Fused softmax cross-entropy over the first vocab_size columns of logits [N,Vp] (columns past
// vocab_size are padding and get probability 0). losses[i] = -log p(targets[i]), and 0 where
// targets[i] == -1. When dlogits is given (it may alias logits): dlogits = (p - onehot) * dloss for
// counted rows, 0 for ignored rows and padding columns.
struct CrossEntropyArgs {
  Tensor losses;   // [N] f32
  Tensor dlogits;  // optional [N,Vp]
  Tensor logits;   // [N,Vp]
  Tensor targets;  // [N] i32
  int vocab_size = 0;
  float dloss = 0.0f;  // d(step loss)/d(token loss): 1 / (target tokens in the optimizer step)
};

// AdamW with decoupled weight decay (Loshchilov & Hutter), bias-corrected:
// g = grad_scale * grads; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
// params -= lr * (m / (1-b1^step) / (sqrt(v / (1-b2^step)) + eps) + weight_decay * params)
struct AdamWArgs {
  Tensor params;
  Tensor grads;
  Tensor m;
  Tensor v;
  float lr = 0.0f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 0.0f;
  float grad_scale = 1.0f;
  int64_t step = 1;
  // Optional (empty: none): a BF16 or F16 tensor without FP8 scaling that receives the updated params
  // too, with the bits cast({compute, params}) would give: the weights' compute copy, written by the
  // update instead of by a cast that reads the masters again before the next forward.
  Tensor compute;
};

// out[0] = sum(in^2), accumulated in double on the CPU; the global gradient norm is its square root.
struct SumOfSquaresArgs {
  Tensor out;  // [1] f32
  Tensor in;
};

// Conversion between storage dtypes, with Transformer Engine's per-tensor scale for FP8:
//   quantise   (in F32/F64 -> out BF16/F16/E4M3/E5M2): out = convert(in * scale)
//   dequantise (in BF16/F16/E4M3/E5M2 -> out F32/F64): out = decode(in) * (1 / scale)
//   F32 <-> F64 (scale must be 1): rounded to nearest.
// in * scale is one multiply in the input's precision (for F32 the GPU's FP32 multiply), then one
// round-to-nearest-even conversion (precision/float_formats.h has the exact rules). 1 / scale is taken in
// the output's precision: for F32 that is the scale_inv that TE stores and multiplies by.
// saturate (FP8 targets only): a magnitude rounding above the format's max, +-inf included, becomes
// +-max (TE's satfinite); without it E4M3 gives NaN and E5M2 +-inf. BF16 and F16 round like IEEE
// (overflow to +-inf), as the GPU's conversions do.
// Optional outputs of a quantise, both running totals so one buffer can gather a whole step (zero them
// when they are read):
//   amax   [1] f32/f64: amax = max(amax, max_i |in[i]|) over the unscaled input; NaN when an input or the
//          old value is NaN. This is the amax that delayed scaling records.
//   counts [2] i32: counts[0] += nonzero inputs stored as +-0 (underflow); counts[1] += inputs whose scaled
//          magnitude rounded above max (saturated, or inf/NaN without saturation). NaN inputs count as neither.
// With an FP8 tensor's scaling state (Tensor::scaling) the state gives the scale instead: an FP8 out is
// stored with out.scaling->scale and adds to its amax and counts, an FP8 in is read times
// in.scaling->scale_inv; then scale must be 1 and amax and counts empty. In that form any float format
// converts to any other (through FP32: exact decode, one rounding).
struct CastArgs {
  Tensor out;
  Tensor in;
  float scale = 1.0f;
  bool saturate = true;
  Tensor amax{};    // optional
  Tensor counts{};  // optional
};

// out[0] = max_i |in[i]| over an F32, F64, BF16, F16, E4M3 or E5M2 tensor: NaN when any element is NaN,
// +inf when any is infinite (a non-finite amax is how overflowed gradients are detected). With
// accumulate, out[0] = max(out[0], that): a running amax over micro-batches. out is [1] f32 or f64.
struct AmaxArgs {
  Tensor out;
  Tensor in;
  bool accumulate = false;
};

// Fake quantisation: the values a narrow-format copy of in would hold, in in's own precision, so a
// matrix product can multiply exactly the operands the GPU multiplies (in FP32, or F64 for checks):
//   out = decode(convert(in * scale)) * (1 / scale)   (dequantize, the default)
//   out = decode(convert(in * scale))                  (!dequantize: the stored values themselves, for a
//                                                      product that applies 1/(scale_a scale_b) through
//                                                      alpha, as cuBLASLt's FP8 GEMM does)
// in and out are F32 or F64 of one dtype and element count; out may alias in. format is BF16, F16, E4M3
// or E5M2; scale, saturate, amax and counts as in CastArgs.
struct QuantizeRoundtripArgs {
  Tensor out;
  Tensor in;
  DType format = DType::E4M3;
  float scale = 1.0f;
  bool saturate = true;
  bool dequantize = true;
  Tensor amax{};    // optional
  Tensor counts{};  // optional
};

// Current scaling (Transformer Engine's Float8CurrentScaling) where the data is, with no copy to the host:
//   scaling->scale = fp8_scale_from_amax(max_i |in[i]|, max of format, margin, scaling->scale)
//   scaling->scale_inv = 1 / scale
// (precision/fp8_scaling.h), so the cast that follows stores in with its own amax's scale. in is any float
// tensor; format E4M3 or E5M2 is the format it is about to be cast to.
struct Fp8CurrentScaleArgs {
  Tensor in;
  Fp8Meta* scaling = nullptr;
  DType format = DType::E4M3;
  int margin = 0;
};

}  // namespace gpt
