// The emulated NCCL of emu/nccl.h: collectives as emulated-stream items that move host memory with MPI.
#include "emu/nccl.h"

#include <mpi.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>

#include <unistd.h>

#include "core/error.h"
#include "emu/internal.h"
#include "precision/float_formats.h"

struct ncclComm {
  MPI_Comm mpi = MPI_COMM_NULL;
  int rank = 0, size = 1;
  std::atomic<bool> aborted{false};
  std::atomic<int> async_error{ncclSuccess};
  // A collective left pending by an abort: MPI cannot cancel it, so the duplicate communicator is never
  // freed (the job is ending anyway).
  std::atomic<bool> abandoned{false};
  std::mutex mutex;
  std::condition_variable idle;
  int in_flight = 0;  // collectives queued and not yet finished

  ~ncclComm() {
    int finalized = 1;
    MPI_Finalized(&finalized);
    if (mpi != MPI_COMM_NULL && !abandoned && !finalized) MPI_Comm_free(&mpi);
  }
};

namespace {

constexpr char kIdMagic[] = "gpt-train emulated NCCL";

std::mutex g_mutex;
// The communicators handed out, by handle; queued collectives hold their own reference, so an aborted
// communicator stays valid until its last collective has left.
std::map<ncclComm*, std::shared_ptr<ncclComm>> g_comms;
std::string g_last_error;

ncclResult_t fail(ncclResult_t code, const std::string& message) {
  std::lock_guard lock(g_mutex);
  g_last_error = message;
  return code;
}

std::shared_ptr<ncclComm> find(ncclComm_t comm) {
  std::lock_guard lock(g_mutex);
  const auto it = g_comms.find(comm);
  return it == g_comms.end() ? nullptr : it->second;
}

size_t type_size(ncclDataType_t type) {
  switch (type) {
    case ncclInt8: case ncclUint8: case ncclFloat8e4m3: case ncclFloat8e5m2: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
    case ncclNumTypes: break;
  }
  return 0;
}

// 16-bit floats sum in f32 with one rounding per addition (round to nearest even), as NCCL's kernels add.
template <float (*decode)(uint16_t), uint16_t (*encode)(float)>
void sum_16bit(void* in, void* inout, int* len, MPI_Datatype*) {
  const auto* a = static_cast<const uint16_t*>(in);
  auto* b = static_cast<uint16_t*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = encode(decode(a[i]) + decode(b[i]));
}

MPI_Op g_sum_bf16 = MPI_OP_NULL, g_sum_f16 = MPI_OP_NULL;

// The MPI type and operation for a reduction, or false when the emulation does not reduce this type so.
bool reduction(ncclDataType_t type, ncclRedOp_t op, MPI_Datatype* mpi_type, MPI_Op* mpi_op) {
  if (op == ncclMax) {
    // Integers only: MPI's max of floats treats NaN otherwise than NCCL's, which drops it.
    *mpi_op = MPI_MAX;
    switch (type) {
      case ncclInt32: *mpi_type = MPI_INT32_T; return true;
      case ncclInt64: *mpi_type = MPI_INT64_T; return true;
      default: return false;
    }
  }
  if (op != ncclSum) return false;
  *mpi_op = MPI_SUM;
  switch (type) {
    case ncclFloat32: *mpi_type = MPI_FLOAT; return true;
    case ncclFloat64: *mpi_type = MPI_DOUBLE; return true;
    case ncclInt32: *mpi_type = MPI_INT32_T; return true;
    case ncclInt64: *mpi_type = MPI_INT64_T; return true;
    case ncclBfloat16: *mpi_type = MPI_UINT16_T; *mpi_op = g_sum_bf16; return true;
    case ncclFloat16: *mpi_type = MPI_UINT16_T; *mpi_op = g_sum_f16; return true;
    default: return false;
  }
}

// Moving data needs only the element size.
MPI_Datatype bytes_type(ncclDataType_t type) {
  switch (type_size(type)) {
    case 1: return MPI_UINT8_T;
    case 2: return MPI_UINT16_T;
    case 4: return MPI_UINT32_T;
    default: return MPI_UINT64_T;
  }
}

using Start = std::function<int(MPI_Comm, MPI_Request*)>;

// Queues one collective on `stream`. Its item posts the MPI operation and tests it until it completes or
// the communicator is aborted; errors become the communicator's asynchronous error, as NCCL reports
// failures of work already queued.
ncclResult_t enqueue(const char* name, ncclComm_t handle, size_t count, cudaStream_t stream, Start start) {
  std::shared_ptr<ncclComm> comm = find(handle);
  if (!comm) return fail(ncclInvalidArgument, fmt::format("{}: not a communicator of ncclCommInitRank", name));
  if (count > static_cast<size_t>(INT_MAX))
    return fail(ncclInvalidArgument, fmt::format("{}: {} elements exceed what the MPI emulation moves at once", name, count));
  if (comm->aborted) return fail(ncclInvalidUsage, fmt::format("{}: the communicator was aborted", name));
  {
    std::lock_guard lock(comm->mutex);
    ++comm->in_flight;
  }
  auto work = [comm, name, start = std::move(start)] {
    auto finish = [&](int error, const std::string& message) {
      if (error != ncclSuccess) {
        int expected = ncclSuccess;
        if (comm->async_error.compare_exchange_strong(expected, error)) fail(static_cast<ncclResult_t>(error), message);
      }
      std::lock_guard lock(comm->mutex);
      --comm->in_flight;
      comm->idle.notify_all();
    };
    if (comm->aborted || comm->async_error != ncclSuccess) return finish(ncclSuccess, "");
    MPI_Request request = MPI_REQUEST_NULL;
    if (start(comm->mpi, &request) != MPI_SUCCESS)
      return finish(ncclSystemError, fmt::format("{}: the MPI operation of the emulation failed", name));
    // Spin briefly (peers usually arrive together), then sleep up to 200 us a round so a long wait leaves
    // the cores to the ranks still computing.
    const auto begin = std::chrono::steady_clock::now();
    auto pause = std::chrono::microseconds(0);
    for (;;) {
      int done = 0;
      if (MPI_Test(&request, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS)
        return finish(ncclSystemError, fmt::format("{}: MPI_Test failed in the emulation", name));
      if (done) return finish(ncclSuccess, "");
      if (comm->aborted) {
        comm->abandoned = true;
        return finish(ncclSystemError, fmt::format("{}: aborted by ncclCommAbort before it completed", name));
      }
      if (std::chrono::steady_clock::now() - begin > std::chrono::microseconds(50)) {
        pause = std::min(std::chrono::microseconds(200), pause + std::chrono::microseconds(10));
        std::this_thread::sleep_for(pause);
      }
    }
  };
  if (gpt::cuda::emu::detail::enqueue(stream, std::move(work)) != cudaSuccess) {
    {
      std::lock_guard lock(comm->mutex);
      --comm->in_flight;
    }
    return fail(ncclUnhandledCudaError,
                fmt::format("{}: the stream refused the work: {}", name, cudaGetErrorString(cudaGetLastError())));
  }
  return ncclSuccess;
}

bool overlap(const void* a, size_t a_bytes, const void* b, size_t b_bytes) {
  const auto* x = static_cast<const char*>(a);
  const auto* y = static_cast<const char*>(b);
  return x < y + b_bytes && y < x + a_bytes;
}

}  // namespace

ncclResult_t ncclGetVersion(int* version) {
  if (version == nullptr) return fail(ncclInvalidArgument, "ncclGetVersion: version is null");
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId* unique_id) {
  if (unique_id == nullptr) return fail(ncclInvalidArgument, "ncclGetUniqueId: uniqueId is null");
  std::memset(unique_id->internal, 0, sizeof(unique_id->internal));
  std::memcpy(unique_id->internal, kIdMagic, sizeof(kIdMagic));
  const uint64_t nonce = (uint64_t{std::random_device{}()} << 32) ^ static_cast<uint64_t>(::getpid());
  std::memcpy(unique_id->internal + sizeof(kIdMagic), &nonce, sizeof(nonce));
  return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t* out, int nranks, ncclUniqueId comm_id, int rank) {
  if (out == nullptr) return fail(ncclInvalidArgument, "ncclCommInitRank: comm is null");
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) return fail(ncclInvalidUsage, "ncclCommInitRank: the emulated NCCL runs over MPI, which is not initialised");
  int level = 0, world_rank = 0, world_size = 0;
  MPI_Query_thread(&level);
  if (level < MPI_THREAD_MULTIPLE)
    return fail(ncclInvalidUsage, "ncclCommInitRank: the emulated NCCL calls MPI from a stream's thread and needs "
                                  "MPI_THREAD_MULTIPLE");
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  if (nranks != world_size || rank != world_rank)
    return fail(ncclInvalidUsage, fmt::format("ncclCommInitRank: rank {} of {}, but the emulated NCCL only builds "
                                              "communicators over all MPI ranks (rank {} of {})",
                                              rank, nranks, world_rank, world_size));
  if (std::memcmp(comm_id.internal, kIdMagic, sizeof(kIdMagic)) != 0)
    return fail(ncclInvalidArgument, "ncclCommInitRank: the unique id does not come from ncclGetUniqueId");
  auto comm = std::make_shared<ncclComm>();
  if (MPI_Comm_dup(MPI_COMM_WORLD, &comm->mpi) != MPI_SUCCESS)
    return fail(ncclSystemError, "ncclCommInitRank: MPI_Comm_dup failed");
  comm->rank = rank;
  comm->size = nranks;
  // Every rank must pass the id of one ncclGetUniqueId: its nonce is the same everywhere.
  uint64_t nonce = 0, low = 0, high = 0;
  std::memcpy(&nonce, comm_id.internal + sizeof(kIdMagic), sizeof(nonce));
  MPI_Allreduce(&nonce, &low, 1, MPI_UINT64_T, MPI_MIN, comm->mpi);
  MPI_Allreduce(&nonce, &high, 1, MPI_UINT64_T, MPI_MAX, comm->mpi);
  if (low != high)
    return fail(ncclInvalidUsage, "ncclCommInitRank: the ranks passed different unique ids (broadcast rank 0's)");
  {
    std::lock_guard lock(g_mutex);
    if (g_sum_bf16 == MPI_OP_NULL) {
      MPI_Op_create(&sum_16bit<gpt::bf16_to_f32, gpt::f32_to_bf16>, 1, &g_sum_bf16);
      MPI_Op_create(&sum_16bit<gpt::f16_to_f32, gpt::f32_to_f16>, 1, &g_sum_f16);
    }
    g_comms[comm.get()] = comm;
  }
  *out = comm.get();
  return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t handle) {
  std::shared_ptr<ncclComm> comm = find(handle);
  if (!comm) return fail(ncclInvalidArgument, "ncclCommDestroy: not a communicator of ncclCommInitRank");
  {
    // NCCL finishes the communicator's queued work first.
    std::unique_lock lock(comm->mutex);
    comm->idle.wait(lock, [&] { return comm->in_flight == 0; });
  }
  std::lock_guard lock(g_mutex);
  g_comms.erase(handle);
  return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t handle) {
  std::shared_ptr<ncclComm> comm = find(handle);
  if (!comm) return fail(ncclInvalidArgument, "ncclCommAbort: not a communicator of ncclCommInitRank");
  comm->aborted = true;
  std::lock_guard lock(g_mutex);
  g_comms.erase(handle);
  return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t handle, ncclResult_t* async_error) {
  std::shared_ptr<ncclComm> comm = find(handle);
  if (!comm || async_error == nullptr) return fail(ncclInvalidArgument, "ncclCommGetAsyncError: bad argument");
  *async_error = static_cast<ncclResult_t>(comm->async_error.load());
  return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t handle, int* count) {
  std::shared_ptr<ncclComm> comm = find(handle);
  if (!comm || count == nullptr) return fail(ncclInvalidArgument, "ncclCommCount: bad argument");
  *count = comm->size;
  return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t handle, int* rank) {
  std::shared_ptr<ncclComm> comm = find(handle);
  if (!comm || rank == nullptr) return fail(ncclInvalidArgument, "ncclCommUserRank: bad argument");
  *rank = comm->rank;
  return ncclSuccess;
}

const char* ncclGetErrorString(ncclResult_t result) {
  switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError: return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    case ncclNumResults: break;
  }
  return "unknown result code";
}

const char* ncclGetLastError(ncclComm_t) {
  static thread_local std::string copy;
  std::lock_guard lock(g_mutex);
  copy = g_last_error;
  return copy.c_str();
}

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  MPI_Datatype type;
  MPI_Op mpi_op;
  if (!reduction(datatype, op, &type, &mpi_op))
    return fail(ncclInvalidArgument, fmt::format("ncclAllReduce: the emulation sums f32, f64, i32, i64, bf16 and f16 "
                                                 "and maxes i32 and i64 (type {}, op {})", int(datatype), int(op)));
  const int n = static_cast<int>(count);
  return enqueue("ncclAllReduce", comm, count, stream, [=](MPI_Comm c, MPI_Request* r) {
    return MPI_Iallreduce(sendbuff == recvbuff ? MPI_IN_PLACE : sendbuff, recvbuff, n, type, mpi_op, c, r);
  });
}

ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  MPI_Datatype type;
  MPI_Op mpi_op;
  if (!reduction(datatype, op, &type, &mpi_op))
    return fail(ncclInvalidArgument, fmt::format("ncclReduceScatter: the emulation sums f32, f64, i32, i64, bf16 and "
                                                 "f16 (type {}, op {})", int(datatype), int(op)));
  const std::shared_ptr<ncclComm> c = find(comm);
  const size_t bytes = recvcount * type_size(datatype);
  if (c && overlap(sendbuff, bytes * static_cast<size_t>(c->size), recvbuff, bytes))
    return fail(ncclInvalidArgument, "ncclReduceScatter: the in-place form is not emulated; pass separate buffers");
  const int n = static_cast<int>(recvcount);
  return enqueue("ncclReduceScatter", comm, recvcount, stream, [=](MPI_Comm m, MPI_Request* r) {
    return MPI_Ireduce_scatter_block(sendbuff, recvbuff, n, type, mpi_op, m, r);
  });
}

ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream) {
  const std::shared_ptr<ncclComm> c = find(comm);
  const size_t bytes = sendcount * type_size(datatype);
  const void* own = c ? static_cast<const char*>(recvbuff) + static_cast<size_t>(c->rank) * bytes : nullptr;
  const bool in_place = sendbuff == own;
  if (c && !in_place && overlap(sendbuff, bytes, recvbuff, bytes * static_cast<size_t>(c->size)))
    return fail(ncclInvalidArgument, "ncclAllGather: sendbuff overlaps recvbuff without being the rank's own chunk");
  const MPI_Datatype type = bytes_type(datatype);
  const int n = static_cast<int>(sendcount);
  return enqueue("ncclAllGather", comm, sendcount, stream, [=](MPI_Comm m, MPI_Request* r) {
    return MPI_Iallgather(in_place ? MPI_IN_PLACE : sendbuff, n, type, recvbuff, n, type, m, r);
  });
}

ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                           ncclComm_t comm, cudaStream_t stream) {
  const std::shared_ptr<ncclComm> c = find(comm);
  if (c && (root < 0 || root >= c->size))
    return fail(ncclInvalidArgument, fmt::format("ncclBroadcast: root {} outside {} ranks", root, c->size));
  const MPI_Datatype type = bytes_type(datatype);
  const int n = static_cast<int>(count);
  const size_t bytes = count * type_size(datatype);
  return enqueue("ncclBroadcast", comm, count, stream, [=](MPI_Comm m, MPI_Request* r) {
    int rank = 0;
    MPI_Comm_rank(m, &rank);
    if (rank == root && sendbuff != recvbuff) std::memmove(recvbuff, sendbuff, bytes);
    return MPI_Ibcast(recvbuff, n, type, root, m, r);
  });
}
