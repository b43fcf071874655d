// Data parallelism over MPI (Open MPI; any MPI-3 library): processes started by mpirun, mpiexec or
// srun, on one node or many. A plain `gpt-train train` is not started by a launcher and never touches
// MPI, so it runs without one.
//
// Non-blocking collectives (MPI_Iallreduce, ...) give the asynchronous forms. MPI moves them forward only
// inside MPI calls, so waiting is a loop of MPI_Test against a deadline (Communicator::timeout_s()): a
// collective that a dead or stuck rank never joins ends in an error naming this rank and the operation
// instead of a silent hang. Only the main thread calls this communicator (MPI_THREAD_FUNNELED would do;
// MpiRuntime asks for MPI_THREAD_MULTIPLE, which the CUDA emulator's NCCL needs); the OpenMP threads
// compute.
#pragma once

#include "dist/communicator.h"

#include <memory>
#include <string>

namespace gpt {

// Whether an MPI launcher started this process: Open MPI's mpirun (OMPI_COMM_WORLD_SIZE), a PMI or PMIx
// launcher such as MPICH's mpiexec or `srun --mpi=pmix` (PMI_SIZE, PMIX_RANK), or srun in a Slurm job
// step (SLURM_STEP_NUM_TASKS).
bool launched_by_mpi_launcher();
// The number of processes the launcher says it started, or 0 when it does not say.
int launcher_world_size();

// MPI_Init_thread on construction, MPI_Finalize on destruction; at most one per process.
class MpiRuntime {
 public:
  MpiRuntime();
  ~MpiRuntime();
  MpiRuntime(const MpiRuntime&) = delete;
  MpiRuntime& operator=(const MpiRuntime&) = delete;

  static bool active();
  // Ends every process of the job (MPI_Abort). After an error on one rank the others would otherwise
  // wait in their next collective until the timeout; the command layer calls this, library code throws.
  [[noreturn]] static void abort_job(int exit_code);
};

class MpiCommunicator final : public Communicator {
 public:
  // Needs an active MpiRuntime; works on a duplicate of MPI_COMM_WORLD.
  MpiCommunicator();
  ~MpiCommunicator() override;

  std::string name() const override { return "mpi"; }
  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  int local_rank() const override { return local_rank_; }
  int local_size() const override { return local_size_; }
  std::vector<int> node_ranks() const override;

  CommHandle all_reduce_sum_async(const Tensor& buf, CommStream stream = {}) override;
  CommHandle reduce_scatter_sum_async(const Tensor& in, const Tensor& out, CommStream stream = {}) override;
  CommHandle all_gather_async(const Tensor& in, const Tensor& out, CommStream stream = {}) override;
  CommHandle all_reduce_max_async(const Tensor& buf, CommStream stream = {}) override;
  CommHandle broadcast_async(const Tensor& buf, int root, CommStream stream = {}) override;
  CommHandle barrier_async() override;
  void poll() override;
  // Counted on the node's progress board, which the node's ranks share.
  int64_t arrive() override;
  // The ranks of this node whose count on the board is below `arrival`.
  std::string missing_ranks(int64_t arrival) const override;

 protected:
  bool test(uint64_t id) override;
  void wait(uint64_t id) override;

 private:
  struct State;
  std::unique_ptr<State> state_;
  int rank_ = 0, world_size_ = 1, local_rank_ = 0, local_size_ = 1;
};

}  // namespace gpt
