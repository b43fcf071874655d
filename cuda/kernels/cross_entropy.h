// Fused softmax cross-entropy: the CUDA backend's ops of this family (the math and layout are in cross_entropy.cu).
#pragma once

#include "backend/op_args.h"
#include "common/device_context.h"

namespace gpt::cuda {

void cross_entropy(const CrossEntropyArgs& args, const DeviceContext& ctx);

}  // namespace gpt::cuda
