// AdamW on FP32 master weights: not written yet; the backend's op fails with a clear message until it is.
#include "kernels/adamw.h"

namespace gpt::cuda {

void adamw_update(const AdamWArgs&, const DeviceContext&) { GPT_FAIL("cuda backend: adamw_update is not implemented yet"); }

}  // namespace gpt::cuda
