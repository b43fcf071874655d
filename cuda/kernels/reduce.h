// Deterministic reductions: the sum of squares and the bias gradient: the CUDA backend's ops of this family (the math and layout are in reduce.cu).
#pragma once

#include "backend/op_args.h"
#include "common/device_context.h"

namespace gpt::cuda {

void sum_of_squares(const SumOfSquaresArgs& args, const DeviceContext& ctx);
void bias_backward(const BiasBackwardArgs& args, const DeviceContext& ctx);

}  // namespace gpt::cuda
