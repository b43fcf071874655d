// The CPU backend as a backend whose device memory is not the host's: what a GPU backend says, so that the
// code paths a GPU takes for host-resident state (optimizer offload's host twin of the compute copy, the
// host masters' broadcast through device memory) run, and can be recorded, on the CPU, where every transfer
// is a copy done at once.
#pragma once

#include "backend/forwarding_backend.h"

namespace gpt::test {

class SeparateHostMemoryBackend : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  BackendCapabilities capabilities() const override {
    BackendCapabilities c = ForwardingBackend::capabilities();
    c.device_memory_is_host = false;
    return c;
  }
};

}  // namespace gpt::test
