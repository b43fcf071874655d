// Residual add with dropout, and its backward: the CUDA backend's ops of this family (the math and layout are in residual.cu).
#pragma once

#include "backend/op_args.h"
#include "common/device_context.h"

namespace gpt::cuda {

void residual_forward(const ResidualForwardArgs& args, const DeviceContext& ctx);
void residual_backward(const ResidualBackwardArgs& args, const DeviceContext& ctx);

}  // namespace gpt::cuda
