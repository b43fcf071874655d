// Token and position embedding, forward and deterministic backward: the CUDA backend's ops of this family (the math and layout are in embedding.cu).
#pragma once

#include "backend/op_args.h"
#include "common/device_context.h"

namespace gpt::cuda {

void embedding_forward(const EmbeddingForwardArgs& args, const DeviceContext& ctx);
void embedding_backward(const EmbeddingBackwardArgs& args, const DeviceContext& ctx);

}  // namespace gpt::cuda
