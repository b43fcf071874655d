// Causal self-attention, materialised (cuBLASLt products and a masked softmax with dropout): the CUDA backend's ops of this family (the math and layout are in attention.cu).
#pragma once

#include "backend/op_args.h"
#include "common/device_context.h"

namespace gpt::cuda {

void attention_forward(const AttentionForwardArgs& args, const DeviceContext& ctx);
void attention_backward(const AttentionBackwardArgs& args, const DeviceContext& ctx);

}  // namespace gpt::cuda
