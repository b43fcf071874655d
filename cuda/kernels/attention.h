// Causal self-attention: the CUDA backend's ops of this family. probs' shape picks the kernels (op_args.h):
// [B,NH,T,T] the materialised attention of attention.cu (cuBLASLt products and a masked softmax with
// dropout), [B,NH,T] (the log-sum-exp) the fused one of flash_attention.h.
#pragma once

#include "backend/op_args.h"
#include "common/device_context.h"

namespace gpt::cuda {

void attention_forward(const AttentionForwardArgs& args, const DeviceContext& ctx);
void attention_backward(const AttentionBackwardArgs& args, const DeviceContext& ctx);

}  // namespace gpt::cuda
