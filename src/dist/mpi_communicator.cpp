#include "dist/mpi_communicator.h"

#include <mpi.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

namespace gpt {
namespace {

[[noreturn]] void mpi_fail(const char* statement, int code, const char* file, int line) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  MPI_Error_string(code, text, &length);
  throw_error(file, line, fmt::format("{} failed: {}", statement, std::string(text, static_cast<size_t>(length))));
}

#define MPI_CHECK(statement)                                                              \
  do {                                                                                    \
    const int mpi_check_code_ = (statement);                                              \
    if (mpi_check_code_ != MPI_SUCCESS) mpi_fail(#statement, mpi_check_code_, __FILE__, __LINE__); \
  } while (0)

bool runtime_active = false;

const char* env(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : nullptr;
}

// Reductions need an arithmetic type; moving data (broadcast, all-gather) only needs the element size, so
// 16-bit floats travel as 16-bit integers.
MPI_Datatype mpi_type(const char* op, DType dtype, bool reduce) {
  switch (dtype) {
    case DType::F32: return MPI_FLOAT;
    case DType::F64: return MPI_DOUBLE;
    case DType::I32: return MPI_INT32_T;
    case DType::U16: return MPI_UINT16_T;
    case DType::U8: return MPI_UINT8_T;
    case DType::BF16: case DType::F16:
      if (!reduce) return MPI_UINT16_T;
      break;
    case DType::E4M3: case DType::E5M2:
      if (!reduce) return MPI_UINT8_T;
      break;
  }
  GPT_FAIL("{}: MPI cannot sum {} values; reduce in f32 (NCCL, with the CUDA backend, sums bf16 and f16)", op,
           dtype_name(dtype));
}

int mpi_count(const char* op, int64_t count) {
  GPT_CHECK(count <= INT_MAX, "{}: {} elements exceed MPI's int count; use smaller buckets", op, count);
  return static_cast<int>(count);
}

void check_host(const char* op, const Tensor& t) {
  GPT_CHECK(t.device == Device::CPU, "{}: the MPI communicator works on host buffers, got a {} buffer", op,
            device_name(t.device));
}

}  // namespace

bool launched_by_mpi_launcher() {
  return env("OMPI_COMM_WORLD_SIZE") || env("PMI_SIZE") || env("PMI_RANK") || env("PMIX_RANK") ||
         env("SLURM_STEP_NUM_TASKS");
}

int launcher_world_size() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_STEP_NUM_TASKS"})
    if (const char* value = env(name)) return std::atoi(value);
  return 0;
}

MpiRuntime::MpiRuntime() {
  GPT_CHECK(!runtime_active, "MPI is already initialised in this process");
  int provided = 0;
  // MPI_THREAD_MULTIPLE where the library has it: the emulated NCCL of the CUDA emulator build calls MPI
  // from a stream's worker thread (cuda/emu/nccl.h). gpt-train's own MPI calls need only FUNNELED.
  MPI_CHECK(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided));
  runtime_active = true;
  GPT_CHECK(provided >= MPI_THREAD_FUNNELED, "the MPI library provides thread level {}, gpt-train needs MPI_THREAD_FUNNELED",
            provided);
}

MpiRuntime::~MpiRuntime() {
  MPI_Finalize();
  runtime_active = false;
}

bool MpiRuntime::active() { return runtime_active; }

void MpiRuntime::abort_job(int exit_code) {
  MPI_Abort(MPI_COMM_WORLD, exit_code);
  std::_Exit(exit_code);  // MPI_Abort does not return; this only satisfies [[noreturn]]
}

// Outstanding operations live in a pool of slots reused across steps, so issuing a collective allocates
// nothing once the pool has grown to the largest number in flight. A handle's id is its slot and the
// slot's serial number at issue time: a handle whose slot has moved on refers to a completed operation.
struct MpiCommunicator::State {
  struct Op {
    MPI_Request request = MPI_REQUEST_NULL;
    bool active = false;
    uint32_t serial = 0;
    const char* name = "";
    int64_t count = 0;
    DType dtype = DType::F32;
    int64_t sequence = 0;  // its number among this rank's arrivals (Communicator::arrive)
  };
  MPI_Comm comm = MPI_COMM_NULL;
  std::vector<Op> ops;

  // The progress board: for each rank of this node, how many collectives it has issued (this
  // communicator's and those of one layered over it, such as NCCL's), in memory the node's ranks share
  // (MPI_Win_allocate_shared). Every rank issues the same collectives in the same order, so when this
  // rank's n-th one times out, a peer whose count is below n has not reached it: the timeout can name it.
  // Reading a peer's count needs no progress on the peer (it may be stuck in compute); ranks on other
  // nodes are not on the board.
  MPI_Win board_window = MPI_WIN_NULL;
  int64_t* board = nullptr;           // [local_size]
  std::vector<int> node_world_ranks;  // world rank of each local rank
  int local_rank = 0;
  int64_t issued = 0;

  static constexpr int kSlotBits = 20;

  // A free slot for a new operation; its request is then started by an MPI_I... call and activate()d.
  size_t free_slot() {
    size_t slot = 0;
    while (slot < ops.size() && ops[slot].active) ++slot;
    if (slot == ops.size()) ops.emplace_back();
    GPT_CHECK(slot < (size_t{1} << kSlotBits), "more than {} MPI operations in flight", slot);
    return slot;
  }
  int64_t arrive() {
    ++issued;
    std::atomic_ref<int64_t>(board[local_rank]).store(issued, std::memory_order_release);
    return issued;
  }
  uint64_t activate(size_t slot, const char* name, int64_t count, DType dtype) {
    Op& op = ops[slot];
    op.active = true;
    ++op.serial;
    op.name = name;
    op.count = count;
    op.dtype = dtype;
    op.sequence = arrive();
    return (static_cast<uint64_t>(op.serial) << kSlotBits) | slot;
  }
  MPI_Request* request(size_t slot) { return &ops[slot].request; }

  Op* find(uint64_t id) {
    const auto slot = static_cast<size_t>(id & ((uint64_t{1} << kSlotBits) - 1));
    const auto serial = static_cast<uint32_t>(id >> kSlotBits);
    if (slot >= ops.size() || !ops[slot].active || ops[slot].serial != serial) return nullptr;
    return &ops[slot];
  }
};

MpiCommunicator::MpiCommunicator() : state_(std::make_unique<State>()) {
  GPT_CHECK(runtime_active, "the MPI communicator needs MPI to be initialised first (MpiRuntime)");
  MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &state_->comm));
  MPI_CHECK(MPI_Comm_set_errhandler(state_->comm, MPI_ERRORS_RETURN));
  MPI_CHECK(MPI_Comm_rank(state_->comm, &rank_));
  MPI_CHECK(MPI_Comm_size(state_->comm, &world_size_));
  MPI_Comm node = MPI_COMM_NULL;
  MPI_CHECK(MPI_Comm_split_type(state_->comm, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node));
  MPI_CHECK(MPI_Comm_rank(node, &local_rank_));
  MPI_CHECK(MPI_Comm_size(node, &local_size_));
  state_->local_rank = local_rank_;
  state_->node_world_ranks.resize(static_cast<size_t>(local_size_));
  MPI_CHECK(MPI_Allgather(&rank_, 1, MPI_INT, state_->node_world_ranks.data(), 1, MPI_INT, node));
  void* own = nullptr;
  MPI_CHECK(MPI_Win_allocate_shared(sizeof(int64_t), sizeof(int64_t), MPI_INFO_NULL, node, &own, &state_->board_window));
  MPI_Aint segment = 0;
  int unit = 0;
  void* first = nullptr;
  MPI_CHECK(MPI_Win_shared_query(state_->board_window, 0, &segment, &unit, &first));
  state_->board = static_cast<int64_t*>(first);
  *static_cast<int64_t*>(own) = 0;
  MPI_CHECK(MPI_Win_lock_all(MPI_MODE_NOCHECK, state_->board_window));
  MPI_CHECK(MPI_Barrier(node));  // every count is 0 before anyone reads one
  MPI_CHECK(MPI_Comm_free(&node));
  state_->ops.reserve(64);
  const int announced = launcher_world_size();
  GPT_CHECK(announced == 0 || announced == world_size_,
            "the launcher started {} processes but MPI sees a world of {}: this MPI library cannot talk to the "
            "launcher (under Slurm use srun --mpi=pmix, or mpirun inside the allocation)",
            announced, world_size_);
}

MpiCommunicator::~MpiCommunicator() {
  // Operations still pending here belong to a job that is failing; MPI_Finalize or MPI_Abort cleans up.
  if (state_->comm != MPI_COMM_NULL && runtime_active) {
    bool pending = false;
    for (const auto& op : state_->ops) pending = pending || op.active;
    if (!pending) {
      MPI_Win_unlock_all(state_->board_window);
      MPI_Win_free(&state_->board_window);
      MPI_Comm_free(&state_->comm);
    }
  }
}

std::vector<int> MpiCommunicator::node_ranks() const { return state_->node_world_ranks; }

CommHandle MpiCommunicator::all_reduce_sum_async(const Tensor& buf, CommStream) {
  const char* op = "all_reduce_sum";
  check_host(op, buf);
  const int n = mpi_count(op, buf.numel());
  MPI_Datatype type = mpi_type(op, buf.dtype, true);
  const size_t slot = state_->free_slot();
  MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, buf.data, n, type, MPI_SUM, state_->comm, state_->request(slot)));
  return make_handle(state_->activate(slot, op, buf.numel(), buf.dtype));
}

CommHandle MpiCommunicator::reduce_scatter_sum_async(const Tensor& in, const Tensor& out, CommStream) {
  const char* op = "reduce_scatter_sum";
  check_host(op, in);
  check_scatter_shapes(op, out, in);
  const char* a = static_cast<const char*>(in.data);
  const char* b = static_cast<const char*>(out.data);
  GPT_CHECK(b + out.bytes() <= a || a + in.bytes() <= b, "{}: in and out overlap", op);
  const int n = mpi_count(op, out.numel());
  MPI_Datatype type = mpi_type(op, in.dtype, true);
  const size_t slot = state_->free_slot();
  MPI_CHECK(MPI_Ireduce_scatter_block(in.data, out.data, n, type, MPI_SUM, state_->comm, state_->request(slot)));
  return make_handle(state_->activate(slot, op, in.numel(), in.dtype));
}

CommHandle MpiCommunicator::all_gather_async(const Tensor& in, const Tensor& out, CommStream) {
  const char* op = "all_gather";
  check_host(op, in);
  check_scatter_shapes(op, in, out);
  const int n = mpi_count(op, in.numel());
  MPI_Datatype type = mpi_type(op, in.dtype, false);
  const void* own_chunk = static_cast<const char*>(out.data) + static_cast<size_t>(rank_) * in.bytes();
  const void* send = in.data == own_chunk ? MPI_IN_PLACE : in.data;
  const size_t slot = state_->free_slot();
  MPI_CHECK(MPI_Iallgather(send, n, type, out.data, n, type, state_->comm, state_->request(slot)));
  return make_handle(state_->activate(slot, op, out.numel(), out.dtype));
}

CommHandle MpiCommunicator::all_reduce_max_async(const Tensor& buf, CommStream) {
  const char* op = "all_reduce_max";
  check_host(op, buf);
  check_max_dtype(op, buf);
  const int n = mpi_count(op, buf.numel());
  const size_t slot = state_->free_slot();
  MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, buf.data, n, MPI_INT32_T, MPI_MAX, state_->comm, state_->request(slot)));
  return make_handle(state_->activate(slot, op, buf.numel(), buf.dtype));
}

CommHandle MpiCommunicator::broadcast_async(const Tensor& buf, int root, CommStream) {
  const char* op = "broadcast";
  check_host(op, buf);
  GPT_CHECK(root >= 0 && root < world_size_, "{}: root {} outside a world of {}", op, root, world_size_);
  const int n = mpi_count(op, buf.numel());
  MPI_Datatype type = mpi_type(op, buf.dtype, false);
  const size_t slot = state_->free_slot();
  MPI_CHECK(MPI_Ibcast(buf.data, n, type, root, state_->comm, state_->request(slot)));
  return make_handle(state_->activate(slot, op, buf.numel(), buf.dtype));
}

CommHandle MpiCommunicator::barrier_async() {
  const size_t slot = state_->free_slot();
  MPI_CHECK(MPI_Ibarrier(state_->comm, state_->request(slot)));
  return make_handle(state_->activate(slot, "barrier", 0, DType::U8));
}

bool MpiCommunicator::test(uint64_t id) {
  State::Op* op = state_->find(id);
  if (op == nullptr) return true;
  int done = 0;
  MPI_CHECK(MPI_Test(&op->request, &done, MPI_STATUS_IGNORE));
  if (done) op->active = false;
  return done != 0;
}

void MpiCommunicator::wait(uint64_t id) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  const auto limit = std::chrono::duration<double>(timeout_s());
  // Spin for the first millisecond (a collective between busy ranks usually completes within it), then
  // back off to sleeps of up to a millisecond so a long wait leaves the core to others.
  auto pause = std::chrono::microseconds(0);
  while (!test(id)) {
    const auto waited = Clock::now() - start;
    if (waited > limit) {
      const State::Op* op = state_->find(id);
      GPT_FAIL("rank {} of {}: {} of {} {} values (its collective #{}) has not completed within {} s (dist.timeout_s): "
               "{}; a rank that has failed, is stuck, or is busy for longer than that (raise dist.timeout_s if so)",
               rank_, world_size_, op->name, op->count, dtype_name(op->dtype), op->sequence, timeout_s(),
               missing_ranks(op->sequence));
    }
    if (waited > std::chrono::milliseconds(1)) {
      pause = std::min<std::chrono::microseconds>(std::chrono::microseconds(1000),
                                                  pause + std::chrono::microseconds(20));
      std::this_thread::sleep_for(pause);
    }
  }
}

int64_t MpiCommunicator::arrive() { return state_->arrive(); }

std::string MpiCommunicator::missing_ranks(int64_t sequence) const {
  std::string behind;
  for (int j = 0; j < local_size_; ++j) {
    if (j == local_rank_) continue;
    const int64_t reached = std::atomic_ref<int64_t>(state_->board[j]).load(std::memory_order_acquire);
    if (reached < sequence)
      behind += fmt::format("{}rank {} has not reached it (it has issued {} collectives)", behind.empty() ? "" : ", ",
                            state_->node_world_ranks[static_cast<size_t>(j)], reached);
  }
  const bool others_elsewhere = local_size_ < world_size_;
  if (behind.empty())
    return others_elsewhere ? "every rank on this node has reached it, so one on another node has not"
                            : "every rank has issued it, so one of them is stuck inside it";
  return others_elsewhere ? behind + " (ranks on other nodes are not visible from here)" : behind;
}

void MpiCommunicator::poll() {
  for (State::Op& op : state_->ops) {
    if (!op.active) continue;
    int done = 0;
    MPI_CHECK(MPI_Test(&op.request, &done, MPI_STATUS_IGNORE));
    if (done) op.active = false;
  }
}

}  // namespace gpt
