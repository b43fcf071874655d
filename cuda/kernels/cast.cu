// Format conversions, amax, fake quantisation and current FP8 scaling: not written yet; the backend's op fails with a clear message until it is.
#include "kernels/cast.h"

namespace gpt::cuda {

void cast(const CastArgs&, const DeviceContext&) { GPT_FAIL("cuda backend: cast is not implemented yet"); }
void amax(const AmaxArgs&, const DeviceContext&) { GPT_FAIL("cuda backend: amax is not implemented yet"); }
void quantize_roundtrip(const QuantizeRoundtripArgs&, const DeviceContext&) { GPT_FAIL("cuda backend: quantize_roundtrip is not implemented yet"); }
void fp8_current_scale(const Fp8CurrentScaleArgs&, const DeviceContext&) { GPT_FAIL("cuda backend: fp8_current_scale is not implemented yet"); }

}  // namespace gpt::cuda
