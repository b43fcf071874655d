// The CUDA backend: the same Backend interface as the CPU's, on one device. Memory comes from the arenas
// (one cudaMalloc each, sized by the plan) plus what this object reserves once at construction (the
// cuBLASLt workspace and a scratch buffer, reported by capabilities() so the plan counts them). Every op
// is a kernel of cuda/kernels or a cuBLASLt product (cuda/gemm), queued on the backend's stream; host
// transfers synchronise with it, except the copy stream's (transfer_to_host/_to_device, memory.offload):
// each waits on the device for the compute stream's work queued before it, through an event, and lands
// while later ops run; an event recorded after it is what wait_transfer and order_after_transfers wait on.
// Pinned host memory is cudaHostAlloc's. GPT_CUDA_SYNC=1 synchronises after every op, so an asynchronous error
// is reported by the op that caused it instead of by a later call.
#pragma once

#include "backend/backend.h"
#include "common/device_context.h"

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace gpt::cuda {

struct DeviceInfo {
  int index = 0;
  std::string name;
  size_t total_bytes = 0;
  int compute_capability = 0;  // major * 10 + minor
  int sm_count = 0;
};

class CudaBackend final : public Backend {
 public:
  // allow_tf32: FP32 products on TF32 tensor cores (10-bit mantissa inputs, FP32 accumulation).
  // attention: what capabilities() reports, so what the model plans and passes; the attention ops take
  // either kind, told apart by the probs tensor's shape (kernels/attention.h).
  explicit CudaBackend(int device_index, bool allow_tf32 = false, AttentionKind attention = AttentionKind::Fused);
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  std::string name() const override { return "cuda"; }
  Device device() const override { return Device::CUDA; }
  BackendCapabilities capabilities() const override;
  // All it holds outside the arenas is what it reserved at construction (capabilities() reports it too).
  size_t workspace_bytes() const override { return reserved_bytes(); }
  // held: allocated_bytes() + reserved_bytes(); used and total from cudaMemGetInfo.
  std::optional<DeviceMemoryUse> device_memory() const override;
  const DeviceInfo& info() const { return info_; }

  void* allocate(size_t bytes) override;
  void deallocate(void* ptr) override;
  void copy_to_device(void* dst, const void* host_src, size_t bytes) override;
  void copy_to_host(void* host_dst, const void* src, size_t bytes) override;
  void synchronize() override;
  // NCCL over this backend's stream and device, bootstrapped over `host` (cuda/comm/).
  std::unique_ptr<Communicator> make_communicator(Communicator& host) override;
  void* allocate_pinned(size_t bytes) override;
  void deallocate_pinned(void* ptr) override;
  uint64_t transfer_to_host(void* host_dst, const void* src, size_t bytes) override;
  uint64_t transfer_to_device(void* dst, const void* host_src, size_t bytes) override;
  void wait_transfer(uint64_t ticket) override;
  void order_after_transfers() override;

  GPT_BACKEND_OPS(GPT_OVERRIDE_BACKEND_OP)

  // Device bytes this backend holds through allocate(), the arenas' memory.
  size_t allocated_bytes() const { return allocated_bytes_; }
  // Device bytes reserved at construction (cuBLASLt workspace, scratch, the bad-input record).
  size_t reserved_bytes() const;

 private:
  void after_op(const char* op);
  // Throws, naming the first bad token id or target the kernels recorded since the last check
  // (seen_errors_, read at the last synchronisation), and clears the record.
  void report_input_errors();
  uint64_t queue_transfer(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind);

  DeviceInfo info_;
  DeviceContext ctx_;
  std::unique_ptr<Gemm> gemm_;
  bool sync_each_op_ = false;
  AttentionKind attention_ = AttentionKind::Fused;
  InputErrors seen_errors_;
  size_t allocated_bytes_ = 0;
  std::unordered_map<void*, size_t> sizes_;  // allocate()'s blocks and their sizes
  // The copy stream: compute_mark_ marks the compute stream's work before a transfer; in_flight_ holds
  // the transfers not yet waited for, each with the event recorded after it, in ticket order.
  struct Transfer {
    uint64_t ticket;
    cudaEvent_t landed;
  };
  cudaStream_t copy_stream_ = nullptr;
  cudaEvent_t compute_mark_ = nullptr;
  std::deque<Transfer> in_flight_;
  std::vector<cudaEvent_t> spare_events_;
  uint64_t transfers_ = 0;
};

// The device a process uses: its local rank modulo the visible devices, so ranks on one node take one
// GPU each. local_rank < 0: the launcher's variable (Open MPI, MVAPICH, Slurm or torchrun's), else 0.
int local_device_index(int device_count, int local_rank = -1);

}  // namespace gpt::cuda
