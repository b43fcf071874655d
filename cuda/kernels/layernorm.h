// LayerNorm forward and backward, alone and fused with the residual add: the CUDA backend's ops of this family (the math and layout are in layernorm.cu).
#pragma once

#include "backend/op_args.h"
#include "common/device_context.h"

namespace gpt::cuda {

void layernorm_forward(const LayerNormForwardArgs& args, const DeviceContext& ctx);
void layernorm_backward(const LayerNormBackwardArgs& args, const DeviceContext& ctx);
void residual_layernorm_forward(const ResidualLayerNormForwardArgs& args, const DeviceContext& ctx);
void layernorm_residual_backward(const LayerNormResidualBackwardArgs& args, const DeviceContext& ctx);

}  // namespace gpt::cuda
