// Fill and copy: the CUDA backend's ops of this family (the math and layout are in fill_copy.cu).
#pragma once

#include "backend/op_args.h"
#include "common/device_context.h"

namespace gpt::cuda {

void fill(const FillArgs& args, const DeviceContext& ctx);
void copy(const CopyArgs& args, const DeviceContext& ctx);

}  // namespace gpt::cuda
