// Row softmax forward and backward: the CUDA backend's ops of this family (the math and layout are in softmax.cu).
#pragma once

#include "backend/op_args.h"
#include "common/device_context.h"

namespace gpt::cuda {

void softmax_forward(const SoftmaxForwardArgs& args, const DeviceContext& ctx);
void softmax_backward(const SoftmaxBackwardArgs& args, const DeviceContext& ctx);

}  // namespace gpt::cuda
