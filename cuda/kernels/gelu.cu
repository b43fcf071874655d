// GELU forward and backward: not written yet; the backend's op fails with a clear message until it is.
#include "kernels/gelu.h"

namespace gpt::cuda {

void gelu_forward(const GeluForwardArgs&, const DeviceContext&) { GPT_FAIL("cuda backend: gelu_forward is not implemented yet"); }
void gelu_backward(const GeluBackwardArgs&, const DeviceContext&) { GPT_FAIL("cuda backend: gelu_backward is not implemented yet"); }

}  // namespace gpt::cuda
