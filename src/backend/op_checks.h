// The argument checks every backend makes of an op before it runs: shapes, element counts, the tensors an
// op needs, and the formats an argument struct itself prescribes (i32 tokens, one-element amax outputs).
// Kept once, so that the CPU and the CUDA backend refuse the same bad call with the same message. What
// only one backend limits stays with it: formats its kernels do not take, a grid's or a scratch's size,
// and checks that read the data (the CPU's token and target ranges).
//
// `op` is the name a message starts with: a fused op checks its halves under its own name.
#pragma once

#include "backend/op_args.h"

#include <cstdint>

namespace gpt {

void check_gelu_forward(const GeluForwardArgs& args);
void check_gelu_backward(const GeluBackwardArgs& args);
void check_residual_forward(const ResidualForwardArgs& args);
void check_residual_backward(const ResidualBackwardArgs& args);

// A row-wise op's rows (every dimension but the last) and columns (the last).
struct RowShape {
  int64_t rows, cols;
};
// The heads, cache capacity and head size of an attention_decode, whose tensors it checks against each other.
struct DecodeShape {
  int64_t heads, capacity, head_size;
};
DecodeShape check_attention_decode(const AttentionDecodeArgs& args);
RowShape check_softmax_forward(const SoftmaxForwardArgs& args);
RowShape check_softmax_backward(const SoftmaxBackwardArgs& args);
RowShape check_layernorm_forward(const LayerNormForwardArgs& args, const char* op = "layernorm_forward");
RowShape check_layernorm_backward(const LayerNormBackwardArgs& args, const char* op = "layernorm_backward");

// Materialised attention: qkv [B,T,3C], out (or dout) [B,T,C], probs [B,NH,T,T].
struct AttentionDims {
  int64_t batch, seq, channels, heads, head_size;
};
// qkv and out (or dout) alone, for an attention that keeps other statistics than probs (the fused one).
AttentionDims check_attention_operands(const char* op, const Tensor& qkv, const Tensor& out, int n_head);
AttentionDims check_attention_forward(const AttentionForwardArgs& args);
AttentionDims check_attention_backward(const AttentionBackwardArgs& args);

// tokens [B,T] i32, the table [Vp,C], the positions [maxT,C] and x (out or dout, named x_name) [B,T,C].
struct EmbeddingDims {
  int64_t b, t, c, vocab;
};
EmbeddingDims check_embedding(const char* op, const Tensor& x, const Tensor& tokens, const Tensor& wte, const Tensor& wpe,
                              const char* x_name);

// logits [N,Vp]: rows N and padded vocabulary Vp.
struct CrossEntropyShape {
  int64_t rows, padded_vocab;
};
CrossEntropyShape check_cross_entropy(const CrossEntropyArgs& args);

// The element count of params.
int64_t check_adamw(const AdamWArgs& args);
void check_sum_of_squares(const SumOfSquaresArgs& args);
// dout's columns, dbias's element count.
int64_t check_bias_backward(const BiasBackwardArgs& args);

// The conversions (cast, amax, quantize_roundtrip, fp8_current_scale): what is needed of every form of
// them; which conversions a backend takes it checks itself.
void check_cast(const CastArgs& args);
void check_amax(const AmaxArgs& args);
void check_quantize_roundtrip(const QuantizeRoundtripArgs& args);
void check_fp8_current_scale(const Fp8CurrentScaleArgs& args);
// A quantising conversion's optional statistics: amax one f32 or f64 element, counts two i32 ones.
void check_stats_outputs(const Tensor& amax, const Tensor& counts, const char* op);

}  // namespace gpt
