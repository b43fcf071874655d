// Communicator: the collectives data parallelism needs, over Tensor views of backend buffers.
//
// The contract is the one NCCL will need under cuda/comm/: buffers are the backend's memory (device
// memory on a GPU); a collective is ordered after the work already issued on `stream` (CommStream{} is
// the backend's default stream), and its result may be used by work issued after wait() returns (on a GPU
// that work may be queued before the collective has completed: cuda/comm/nccl_communicator.h). Every
// collective has an asynchronous form returning a CommHandle; the blocking form is the asynchronous one
// followed by wait(). The single-process and MPI communicators work on host memory and ignore the stream.
//
// Every rank must issue the same collectives in the same order. A collective that has not completed
// within timeout_s() makes wait() throw gpt::Error naming the rank, the operation and, where the
// communicator can tell, the ranks that never reached it (arrive()), so a rank that died or hangs never
// leaves the others waiting silently.
//
// Reductions sum; there is no average (ncclAvg), since nothing wants one. Every mean the trainer takes
// is over target tokens, of which the ranks hold different numbers (masked targets): the loss gradient
// is scaled by 1/N before backward, N the step's target tokens summed over the ranks
// (src/train/step_runner.cpp), so the summed gradients are the mean over the tokens, and the loss and
// the validation loss are sums divided once by summed counts. Averaging the gradients over the ranks
// would divide them by W once more; a mean of per-rank means would weigh every rank alike whatever its
// number of tokens.
#pragma once

#include "core/tensor.h"

#include <cstdint>
#include <string>
#include <vector>

namespace gpt {

// Where a collective runs: a cudaStream_t for NCCL; host communicators ignore it.
struct CommStream {
  void* handle = nullptr;
};

class Communicator;

// Completion of an asynchronous collective. Move-only; a default-constructed handle is complete.
class CommHandle {
 public:
  CommHandle() = default;
  CommHandle(CommHandle&& other) noexcept : comm_(other.comm_), id_(other.id_) { other.comm_ = nullptr; }
  CommHandle& operator=(CommHandle&& other) noexcept;
  CommHandle(const CommHandle&) = delete;
  CommHandle& operator=(const CommHandle&) = delete;
  ~CommHandle() = default;  // dropping a pending handle leaves the operation to the communicator

  // Blocks until the operation has completed; throws gpt::Error when the communicator's timeout passes
  // first (the operation then stays pending and the job is expected to abort).
  void wait();
  // Whether the operation has completed; also drives its progress. Never blocks.
  bool test();
  bool pending() const { return comm_ != nullptr; }

 private:
  friend class Communicator;
  CommHandle(Communicator* comm, uint64_t id) : comm_(comm), id_(id) {}
  Communicator* comm_ = nullptr;
  uint64_t id_ = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual std::string name() const = 0;  // "single", "mpi", "nccl"
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  virtual int local_rank() const = 0;  // rank among the processes on this node
  virtual int local_size() const = 0;  // processes on this node
  // The world ranks of the processes on this node, by local rank: which ranks share this host's memory.
  virtual std::vector<int> node_ranks() const = 0;
  // Whether the sum collectives take buffers of this dtype (MPI: f32, f64, i32; NCCL also bf16, f16).
  virtual bool sums(DType dtype) const { return dtype == DType::F32 || dtype == DType::F64 || dtype == DType::I32; }

  // buf = the sum over ranks of buf, in place.
  virtual CommHandle all_reduce_sum_async(const Tensor& buf, CommStream stream = {}) = 0;
  // in is world_size() equal chunks; out (one chunk) receives the sum over ranks of chunk rank(). in and
  // out must not overlap.
  virtual CommHandle reduce_scatter_sum_async(const Tensor& in, const Tensor& out, CommStream stream = {}) = 0;
  // out is world_size() equal chunks; chunk r receives rank r's in. in may be chunk rank() of out itself
  // (in place), or a separate buffer.
  virtual CommHandle all_gather_async(const Tensor& in, const Tensor& out, CommStream stream = {}) = 0;
  // buf = the elementwise max over ranks of buf, in place; i32 values only, which every library maxes
  // exactly (NCCL's float max drops NaNs: DataParallel::all_reduce_max maps floats to ordered integers).
  virtual CommHandle all_reduce_max_async(const Tensor& buf, CommStream stream = {}) = 0;
  // buf = root's buf on every rank.
  virtual CommHandle broadcast_async(const Tensor& buf, int root, CommStream stream = {}) = 0;
  virtual CommHandle barrier_async() = 0;

  void all_reduce_sum(const Tensor& buf, CommStream stream = {}) { all_reduce_sum_async(buf, stream).wait(); }
  void all_reduce_max(const Tensor& buf, CommStream stream = {}) { all_reduce_max_async(buf, stream).wait(); }
  void reduce_scatter_sum(const Tensor& in, const Tensor& out, CommStream stream = {}) {
    reduce_scatter_sum_async(in, out, stream).wait();
  }
  void all_gather(const Tensor& in, const Tensor& out, CommStream stream = {}) { all_gather_async(in, out, stream).wait(); }
  void broadcast(const Tensor& buf, int root, CommStream stream = {}) { broadcast_async(buf, root, stream).wait(); }
  void barrier() { barrier_async().wait(); }

  // Lets outstanding operations advance without blocking. MPI moves non-blocking collectives forward
  // only inside MPI calls, so the trainer calls this between pieces of computation.
  virtual void poll() {}

  // Seconds wait() allows a collective before it throws.
  virtual double timeout_s() const { return timeout_s_; }
  virtual void set_timeout(double seconds) { timeout_s_ = seconds; }

  // Arrivals, so that a timeout can name the ranks that never reached the collective. Each rank counts
  // the collectives it issues where the other ranks of its node read the count without its help (a
  // stopped rank answers no message). A communicator layered over this one (NCCL bootstrapped over MPI)
  // counts its collectives here too: the ranks issue the job's collectives over both in one order, so one
  // count serves both.
  // Counts one more collective issued by this rank; returns its number (1, 2, ...), or 0 where this
  // communicator keeps no count.
  virtual int64_t arrive() { return 0; }
  // The ranks that have not reached this rank's collective number `arrival`, in words; empty where the
  // communicator cannot tell. Reads memory only, so any thread may ask (a watchdog does).
  virtual std::string missing_ranks(int64_t /*arrival*/) const { return {}; }

 protected:
  friend class CommHandle;
  CommHandle make_handle(uint64_t id) { return CommHandle(this, id); }
  // Completion of the operation behind a handle this communicator made.
  virtual bool test(uint64_t id);
  virtual void wait(uint64_t id);

  // Argument checks shared by the implementations; `op` names the collective in messages.
  void check_same_dtype(const char* op, const Tensor& a, const Tensor& b) const;
  void check_scatter_shapes(const char* op, const Tensor& chunk, const Tensor& whole) const;
  void check_max_dtype(const char* op, const Tensor& buf) const;

 private:
  double timeout_s_ = 600.0;
};

// Wraps another communicator and forwards every call; handles stay those of the wrapped one. A base for
// decorators that observe the traffic (tests count reductions with one).
class ForwardingCommunicator : public Communicator {
 public:
  explicit ForwardingCommunicator(Communicator& inner) : inner_(inner) {}

  std::string name() const override { return inner_.name(); }
  int rank() const override { return inner_.rank(); }
  int world_size() const override { return inner_.world_size(); }
  int local_rank() const override { return inner_.local_rank(); }
  int local_size() const override { return inner_.local_size(); }
  std::vector<int> node_ranks() const override { return inner_.node_ranks(); }
  bool sums(DType dtype) const override { return inner_.sums(dtype); }
  CommHandle all_reduce_sum_async(const Tensor& buf, CommStream stream = {}) override {
    return inner_.all_reduce_sum_async(buf, stream);
  }
  CommHandle reduce_scatter_sum_async(const Tensor& in, const Tensor& out, CommStream stream = {}) override {
    return inner_.reduce_scatter_sum_async(in, out, stream);
  }
  CommHandle all_gather_async(const Tensor& in, const Tensor& out, CommStream stream = {}) override {
    return inner_.all_gather_async(in, out, stream);
  }
  CommHandle all_reduce_max_async(const Tensor& buf, CommStream stream = {}) override {
    return inner_.all_reduce_max_async(buf, stream);
  }
  CommHandle broadcast_async(const Tensor& buf, int root, CommStream stream = {}) override {
    return inner_.broadcast_async(buf, root, stream);
  }
  CommHandle barrier_async() override { return inner_.barrier_async(); }
  void poll() override { inner_.poll(); }
  double timeout_s() const override { return inner_.timeout_s(); }
  void set_timeout(double seconds) override { inner_.set_timeout(seconds); }
  int64_t arrive() override { return inner_.arrive(); }
  std::string missing_ranks(int64_t arrival) const override { return inner_.missing_ranks(arrival); }

 protected:
  Communicator& inner_;
};

}  // namespace gpt
