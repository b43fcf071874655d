// Token and position embedding, forward and deterministic backward: not written yet; the backend's op fails with a clear message until it is.
#include "kernels/embedding.h"

namespace gpt::cuda {

void embedding_forward(const EmbeddingForwardArgs&, const DeviceContext&) { GPT_FAIL("cuda backend: embedding_forward is not implemented yet"); }
void embedding_backward(const EmbeddingBackwardArgs&, const DeviceContext&) { GPT_FAIL("cuda backend: embedding_backward is not implemented yet"); }

}  // namespace gpt::cuda
