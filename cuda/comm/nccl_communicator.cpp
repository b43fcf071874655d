#include "comm/nccl_communicator.h"

#include "comm/nccl_api.h"
#include "common/cuda_check.h"

#include <spdlog/spdlog.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace gpt::cuda {
namespace {

using Clock = std::chrono::steady_clock;

// Reductions need NCCL's arithmetic type; moving data needs only bytes.
bool nccl_arithmetic_type(DType dtype, ncclDataType_t* type) {
  switch (dtype) {
    case DType::F32: *type = ncclFloat32; return true;
    case DType::F64: *type = ncclFloat64; return true;
    case DType::BF16: *type = ncclBfloat16; return true;
    case DType::F16: *type = ncclFloat16; return true;
    case DType::I32: *type = ncclInt32; return true;
    default: return false;
  }
}

// The NCCL type `op` sums `dtype` values in; throws naming the op where NCCL cannot.
ncclDataType_t sum_type_of(const char* op, DType dtype) {
  ncclDataType_t type;
  GPT_CHECK(nccl_arithmetic_type(dtype, &type), "{}: NCCL does not sum {} values here; reduce in f32 or bf16", op,
            dtype_name(dtype));
  return type;
}

void check_device(const char* op, const Tensor& t) {
  GPT_CHECK(t.device == Device::CUDA, "{}: the NCCL communicator works on device buffers, got a {} buffer", op,
            device_name(t.device));
}

}  // namespace

// Operations live in slots reused across steps, each with its two events created once, so issuing a
// collective allocates nothing once the pool has grown to the largest number in flight. A handle's id is
// its slot and the slot's serial number at issue time: a slot is freed once its collective has completed
// on the device, so a handle whose slot has moved on refers to a completed collective, which nothing
// needs to wait for.
struct NcclCommunicator::State {
  enum class Phase { kFree, kIssuing, kQueued };
  struct Op {
    cudaEvent_t ready = nullptr, done = nullptr;
    Phase phase = Phase::kFree;
    uint32_t serial = 0;
    const char* name = "";
    int64_t count = 0;
    DType dtype = DType::F32;
    int64_t sequence = 0;  // its number among the job's collectives on this rank (Communicator::arrive)
    Clock::time_point issued;
    cudaStream_t waiter = nullptr;  // the stream the collective is ordered after, which wait() orders after it
  };
  static constexpr int kSlotBits = 20;

  ncclComm_t comm = nullptr;
  Communicator* bootstrap = nullptr;  // counts the arrivals and names the ranks missing from one
  cudaStream_t compute = nullptr, stream = nullptr;
  int device = 0, rank = 0, world = 1;
  std::atomic<double> timeout_s{600.0};

  std::mutex mutex;  // guards ops, failure, stopping; never held across an NCCL call
  std::vector<Op> ops;
  std::string failure;  // the watchdog's message once it has aborted
  std::atomic<bool> aborted{false};
  bool stopping = false;
  std::condition_variable wake;
  std::thread watchdog;

  uint64_t id_of(size_t slot) const { return (static_cast<uint64_t>(ops[slot].serial) << kSlotBits) | slot; }
  Op* find(uint64_t id) {
    const auto slot = static_cast<size_t>(id & ((uint64_t{1} << kSlotBits) - 1));
    const auto serial = static_cast<uint32_t>(id >> kSlotBits);
    if (slot >= ops.size() || ops[slot].serial != serial || ops[slot].phase == Phase::kFree) return nullptr;
    return &ops[slot];
  }
  // A slot whose collective has completed, or a new one. Under `mutex`.
  size_t free_slot() {
    for (size_t i = 0; i < ops.size(); ++i) {
      Op& op = ops[i];
      if (op.phase == Phase::kQueued && cudaEventQuery(op.done) == cudaSuccess) op.phase = Phase::kFree;
      if (op.phase == Phase::kFree) return i;
    }
    GPT_CHECK(ops.size() < (size_t{1} << kSlotBits), "more than {} NCCL operations in flight", ops.size());
    Op& op = ops.emplace_back();
    CUDA_CHECK(cudaEventCreateWithFlags(&op.ready, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventCreateWithFlags(&op.done, cudaEventDisableTiming));
    return ops.size() - 1;
  }

  // One collective: ordered after `user`'s work (null: the compute stream), run on the communication
  // stream, its completion recorded. The watchdog times it from here, NCCL's own enqueue included (which
  // may block while NCCL connects to its peers).
  template <class Call>
  uint64_t issue(const char* name, int64_t count, DType dtype, CommStream user, Call call) {
    throw_if_failed();
    cudaStream_t waiter = user.handle != nullptr ? static_cast<cudaStream_t>(user.handle) : compute;
    const int64_t sequence = bootstrap->arrive();
    size_t slot = 0;
    {
      std::lock_guard lock(mutex);
      slot = free_slot();
      Op& op = ops[slot];
      op.phase = Phase::kIssuing;
      ++op.serial;
      op.name = name;
      op.count = count;
      op.dtype = dtype;
      op.sequence = sequence;
      op.issued = Clock::now();
      op.waiter = waiter;
    }
    cudaEvent_t ready = ops[slot].ready, done = ops[slot].done;
    try {
      CUDA_CHECK(cudaEventRecord(ready, waiter));
      CUDA_CHECK(cudaStreamWaitEvent(stream, ready, 0));
      NCCL_CHECK(call(stream));
      CUDA_CHECK(cudaEventRecord(done, stream));
    } catch (...) {
      // Never queued: nothing for the watchdog to time.
      std::lock_guard lock(mutex);
      ops[slot].phase = Phase::kFree;
      throw;
    }
    std::lock_guard lock(mutex);
    ops[slot].phase = Phase::kQueued;
    return id_of(slot);
  }

  // Records the failure once, logs it and aborts the NCCL communicator, which ends the collectives
  // still queued on the communication stream. Any thread.
  void fail(std::string message) {
    {
      std::lock_guard lock(mutex);
      if (!failure.empty()) return;
      failure = std::move(message);
    }
    spdlog::error("{}", failure);
    abort();
  }
  void abort() {
    if (!aborted.exchange(true)) ncclCommAbort(comm);
  }
  void throw_if_failed() {
    std::lock_guard lock(mutex);
    if (!failure.empty()) GPT_FAIL("{}", failure);
  }

  void watch() {
    // cudaEventQuery from this thread needs the rank's device current here too.
    cudaSetDevice(device);
    std::unique_lock lock(mutex);
    while (!stopping && failure.empty()) {
      wake.wait_for(lock, std::chrono::milliseconds(50));
      if (stopping) return;
      const auto now = Clock::now();
      const double limit = timeout_s.load();
      std::string late;
      for (Op& op : ops) {
        if (op.phase == Phase::kFree) continue;
        if (op.phase == Phase::kQueued && cudaEventQuery(op.done) == cudaSuccess) {
          op.phase = Phase::kFree;
          continue;
        }
        if (std::chrono::duration<double>(now - op.issued).count() > limit && late.empty()) {
          const std::string missing = bootstrap->missing_ranks(op.sequence);
          late = fmt::format("rank {} of {}: NCCL {} of {} {} values (its collective #{}) has not completed within "
                             "{} s (dist.timeout_s){}{}; the watchdog aborted the NCCL communicator: a rank has "
                             "failed, is stuck, or is busy for longer than that (raise dist.timeout_s if so)",
                             rank, world, op.name, op.count, dtype_name(op.dtype), op.sequence, limit,
                             missing.empty() ? "" : ": ", missing);
        }
      }
      ncclResult_t async = ncclSuccess;
      if (late.empty() && ncclCommGetAsyncError(comm, &async) == ncclSuccess && async != ncclSuccess &&
          async != ncclInProgress)
        late = fmt::format("rank {} of {}: NCCL reported an asynchronous error: {} ({}); the watchdog aborted the "
                           "NCCL communicator",
                           rank, world, ncclGetErrorString(async), ncclGetLastError(comm));
      if (!late.empty()) {
        lock.unlock();
        fail(std::move(late));
        return;
      }
    }
  }
};

NcclCommunicator::NcclCommunicator(Communicator& bootstrap, void* compute_stream, int device)
    : state_(std::make_unique<State>()), bootstrap_(bootstrap) {
  State& s = *state_;
  s.bootstrap = &bootstrap;
  s.compute = static_cast<cudaStream_t>(compute_stream);
  s.device = device;
  s.rank = bootstrap.rank();
  s.world = bootstrap.world_size();
  s.timeout_s = bootstrap.timeout_s();
  ncclUniqueId id{};
  if (s.rank == 0) NCCL_CHECK(ncclGetUniqueId(&id));
  bootstrap.broadcast(Tensor(id.internal, {NCCL_UNIQUE_ID_BYTES}, DType::U8, Device::CPU), 0);
  NCCL_CHECK(ncclCommInitRank(&s.comm, s.world, id, s.rank));
  CUDA_CHECK(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking));
  s.ops.reserve(64);
  s.watchdog = std::thread([&s] { s.watch(); });
  int version = 0;
  ncclGetVersion(&version);
  spdlog::debug("rank {}: NCCL {} communicator of {} ranks on device {}", s.rank, version, s.world, device);
}

NcclCommunicator::~NcclCommunicator() {
  State& s = *state_;
  {
    std::lock_guard lock(s.mutex);
    s.stopping = true;
  }
  s.wake.notify_all();
  s.watchdog.join();
  // A rank unwinding an error must not wait for collectives its peers may never join. Otherwise the
  // queue drains, within the timeout (a peer that died meanwhile would leave it pending forever).
  bool drained = false;
  if (std::uncaught_exceptions() == 0 && !s.aborted) {
    const auto deadline = Clock::now() + std::chrono::duration<double>(s.timeout_s.load());
    cudaError_t status = cudaErrorNotReady;
    while ((status = cudaStreamQuery(s.stream)) == cudaErrorNotReady && Clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    drained = status == cudaSuccess;
  }
  if (drained) ncclCommDestroy(s.comm);
  else s.abort();
  // Destructors must not throw: failures here (a device in an error state) are ignored.
  cudaStreamSynchronize(s.stream);
  for (State::Op& op : s.ops) {
    cudaEventDestroy(op.ready);
    cudaEventDestroy(op.done);
  }
  cudaStreamDestroy(s.stream);
}

bool NcclCommunicator::sums(DType dtype) const {
  ncclDataType_t type;
  return nccl_arithmetic_type(dtype, &type);
}

double NcclCommunicator::timeout_s() const { return state_->timeout_s.load(); }

void NcclCommunicator::set_timeout(double seconds) { state_->timeout_s = seconds; }

void NcclCommunicator::poll() { state_->throw_if_failed(); }

CommHandle NcclCommunicator::all_reduce_sum_async(const Tensor& buf, CommStream stream) {
  const char* op = "all_reduce_sum";
  check_device(op, buf);
  const ncclDataType_t type = sum_type_of(op, buf.dtype);
  ncclComm_t comm = state_->comm;
  const auto n = static_cast<size_t>(buf.numel());
  return make_handle(state_->issue(op, buf.numel(), buf.dtype, stream, [&](cudaStream_t s) {
    return ncclAllReduce(buf.data, buf.data, n, type, ncclSum, comm, s);
  }));
}

CommHandle NcclCommunicator::reduce_scatter_sum_async(const Tensor& in, const Tensor& out, CommStream stream) {
  const char* op = "reduce_scatter_sum";
  check_device(op, in);
  check_scatter_shapes(op, out, in);
  const char* a = static_cast<const char*>(in.data);
  const char* b = static_cast<const char*>(out.data);
  GPT_CHECK(b + out.bytes() <= a || a + in.bytes() <= b, "{}: in and out overlap", op);
  const ncclDataType_t type = sum_type_of(op, in.dtype);
  ncclComm_t comm = state_->comm;
  const auto n = static_cast<size_t>(out.numel());
  return make_handle(state_->issue(op, in.numel(), in.dtype, stream, [&](cudaStream_t s) {
    return ncclReduceScatter(in.data, out.data, n, type, ncclSum, comm, s);
  }));
}

CommHandle NcclCommunicator::all_gather_async(const Tensor& in, const Tensor& out, CommStream stream) {
  const char* op = "all_gather";
  check_device(op, in);
  check_scatter_shapes(op, in, out);
  ncclComm_t comm = state_->comm;
  const size_t bytes = in.bytes();
  return make_handle(state_->issue(op, out.numel(), out.dtype, stream, [&](cudaStream_t s) {
    return ncclAllGather(in.data, out.data, bytes, ncclUint8, comm, s);
  }));
}

CommHandle NcclCommunicator::all_reduce_max_async(const Tensor& buf, CommStream stream) {
  const char* op = "all_reduce_max";
  check_device(op, buf);
  check_max_dtype(op, buf);
  ncclComm_t comm = state_->comm;
  const auto n = static_cast<size_t>(buf.numel());
  return make_handle(state_->issue(op, buf.numel(), buf.dtype, stream, [&](cudaStream_t s) {
    return ncclAllReduce(buf.data, buf.data, n, ncclInt32, ncclMax, comm, s);
  }));
}

CommHandle NcclCommunicator::broadcast_async(const Tensor& buf, int root, CommStream stream) {
  const char* op = "broadcast";
  check_device(op, buf);
  GPT_CHECK(root >= 0 && root < world_size(), "{}: root {} outside a world of {}", op, root, world_size());
  ncclComm_t comm = state_->comm;
  const size_t bytes = buf.bytes();
  return make_handle(state_->issue(op, buf.numel(), buf.dtype, stream, [&](cudaStream_t s) {
    return ncclBroadcast(buf.data, buf.data, bytes, ncclUint8, root, comm, s);
  }));
}

bool NcclCommunicator::test(uint64_t id) {
  State& s = *state_;
  s.throw_if_failed();
  std::lock_guard lock(s.mutex);
  State::Op* op = s.find(id);
  if (op == nullptr) return true;
  const cudaError_t status = cudaEventQuery(op->done);
  if (status == cudaErrorNotReady) return false;
  CUDA_CHECK(status);
  op->phase = State::Phase::kFree;
  return true;
}

void NcclCommunicator::wait(uint64_t id) {
  State& s = *state_;
  s.throw_if_failed();
  std::lock_guard lock(s.mutex);
  State::Op* op = s.find(id);
  if (op == nullptr) return;
  // The stream the collective was ordered after waits for it; the host goes on queueing work.
  CUDA_CHECK(cudaStreamWaitEvent(op->waiter, op->done, 0));
}

}  // namespace gpt::cuda
