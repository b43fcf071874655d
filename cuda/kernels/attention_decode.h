// One new position's attention over a KV cache, every head (AttentionDecodeArgs, op_args.h): the CUDA
// backend's kernel for the KV-cache decoder (the math and layout are in attention_decode.cu).
#pragma once

#include "backend/op_args.h"
#include "common/device_context.h"

namespace gpt::cuda {

void attention_decode(const AttentionDecodeArgs& args, const DeviceContext& ctx);

}  // namespace gpt::cuda
