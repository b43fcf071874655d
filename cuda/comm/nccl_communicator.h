// Data parallelism on GPUs: the Communicator of src/dist over NCCL, one communicator per job.
//
// Bootstrap (as llm.c's zero.cuh): the job's MPI communicator carries rank 0's ncclUniqueId to every
// rank, and each rank joins with ncclCommInitRank on the GPU its backend already made current (chosen
// from the rank's local rank on its node). MPI stays for what is not data on the GPU: the barrier.
//
// Ordering. Collectives run on a communication stream of their own. Issuing one records an event on the
// stream it is ordered after (CommStream{}: the backend's compute stream) and makes the communication
// stream wait for it, so a gradient bucket reduces as soon as backward has produced it while backward
// carries on. wait() does not block the host: it makes the compute stream wait for the collective's
// completion event, so the optimizer's work queued after it runs once the bucket has landed, bucket by
// bucket in the order they were waited. test() asks the completion event.
//
// Faults. Since wait() returns before the collective completes, the timeout is a watchdog thread's:
// a collective not complete within timeout_s() after it was issued, or an asynchronous NCCL error,
// aborts the NCCL communicator (ncclCommAbort, which also ends collectives still queued, so nothing waits
// on them forever), logs the rank, the operation, its number and the ranks of the node that never issued
// it (read from the bootstrap's progress board: a stopped rank cannot answer a message), and makes every
// later call throw that message, which ends the job through the command layer's MPI_Abort. Destroyed
// while an exception unwinds (this rank failed) the communicator aborts instead of finishing its queue,
// which a peer that stopped would never let complete.
#pragma once

#include "dist/communicator.h"

#include <memory>
#include <string>

namespace gpt::cuda {

class NcclCommunicator final : public Communicator {
 public:
  // bootstrap: the job's MPI communicator, which outlives this one. compute_stream: the backend's
  // cudaStream_t (what CommStream{} means). device: the CUDA device of this rank, already current.
  NcclCommunicator(Communicator& bootstrap, void* compute_stream, int device);
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  std::string name() const override { return "nccl"; }
  int rank() const override { return bootstrap_.rank(); }
  int world_size() const override { return bootstrap_.world_size(); }
  int local_rank() const override { return bootstrap_.local_rank(); }
  int local_size() const override { return bootstrap_.local_size(); }
  std::vector<int> node_ranks() const override { return bootstrap_.node_ranks(); }
  bool sums(DType dtype) const override;

  CommHandle all_reduce_sum_async(const Tensor& buf, CommStream stream = {}) override;
  CommHandle reduce_scatter_sum_async(const Tensor& in, const Tensor& out, CommStream stream = {}) override;
  CommHandle all_gather_async(const Tensor& in, const Tensor& out, CommStream stream = {}) override;
  CommHandle all_reduce_max_async(const Tensor& buf, CommStream stream = {}) override;
  CommHandle broadcast_async(const Tensor& buf, int root, CommStream stream = {}) override;
  // Over MPI: a barrier orders what the hosts do (ZeRO-1's checkpoint shards are files written after a
  // synchronous copy from the device), which a barrier on the communication stream would not.
  CommHandle barrier_async() override { return bootstrap_.barrier_async(); }
  // Throws the watchdog's message once it has aborted the communicator.
  void poll() override;
  // On the bootstrap's board, so the watchdog can name the ranks a late collective waits for.
  int64_t arrive() override { return bootstrap_.arrive(); }
  std::string missing_ranks(int64_t arrival) const override { return bootstrap_.missing_ranks(arrival); }

  double timeout_s() const override;
  void set_timeout(double seconds) override;

 protected:
  bool test(uint64_t id) override;
  void wait(uint64_t id) override;

 private:
  struct State;
  std::unique_ptr<State> state_;
  Communicator& bootstrap_;
};

}  // namespace gpt::cuda
