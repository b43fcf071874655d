// The CUDA backend's communicator for data parallelism: NCCL on the backend's device, ordered after its
// stream. Here rather than in cuda_backend.cpp so the backend's ops and its communication build apart
// (the GPU build links NCCL only through cuda/comm).
#include "backend/cuda_backend.h"
#include "comm/nccl_communicator.h"

namespace gpt::cuda {

std::unique_ptr<Communicator> CudaBackend::make_communicator(Communicator& host) {
  return std::make_unique<NcclCommunicator>(host, ctx_.stream, info_.index);
}

}  // namespace gpt::cuda
