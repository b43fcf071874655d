// Format conversions, amax, fake quantisation and current FP8 scaling: the CUDA backend's ops of this family (the math and layout are in cast.cu).
#pragma once

#include "backend/op_args.h"
#include "common/device_context.h"

namespace gpt::cuda {

void cast(const CastArgs& args, const DeviceContext& ctx);
void amax(const AmaxArgs& args, const DeviceContext& ctx);
void quantize_roundtrip(const QuantizeRoundtripArgs& args, const DeviceContext& ctx);
void fp8_current_scale(const Fp8CurrentScaleArgs& args, const DeviceContext& ctx);

}  // namespace gpt::cuda
