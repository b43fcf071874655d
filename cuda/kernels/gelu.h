// GELU forward and backward: the CUDA backend's ops of this family (the math and layout are in gelu.cu).
#pragma once

#include "backend/op_args.h"
#include "common/device_context.h"

namespace gpt::cuda {

void gelu_forward(const GeluForwardArgs& args, const DeviceContext& ctx);
void gelu_backward(const GeluBackwardArgs& args, const DeviceContext& ctx);

}  // namespace gpt::cuda
