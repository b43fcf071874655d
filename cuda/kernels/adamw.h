// AdamW on FP32 master weights: the CUDA backend's ops of this family (the math and layout are in adamw.cu).
#pragma once

#include "backend/op_args.h"
#include "common/device_context.h"

namespace gpt::cuda {

void adamw_update(const AdamWArgs& args, const DeviceContext& ctx);

}  // namespace gpt::cuda
