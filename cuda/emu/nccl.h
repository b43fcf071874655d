// Host emulation of NCCL (GPT_CUDA_EMU builds only): the subset of nccl.h that cuda/comm calls, with
// NCCL's names, values and semantics, so cuda/comm/nccl_communicator.cpp runs unchanged in CI.
//
// How it works: each collective is one item on an emulated stream (cuda/emu/streams.cpp), so it runs in
// stream order after the work queued before it and before the work queued after it, as NCCL's kernel
// does. The item moves the data with MPI's non-blocking collectives on host memory (the emulator's
// device memory), on a duplicate of MPI_COMM_WORLD made by ncclCommInitRank. While it waits it checks
// the communicator's abort flag, so ncclCommAbort from another thread ends a collective that a dead
// peer never joins, as NCCL's kernels poll theirs; the communicator's asynchronous error then says so.
//
// Limits, each an ncclInvalidArgument/ncclInvalidUsage with a message from ncclGetLastError:
// - a communicator spans all MPI ranks (nranks == MPI world size, rank == MPI rank);
// - MPI must be initialised with MPI_THREAD_MULTIPLE (the stream's worker thread calls MPI);
// - reductions: ncclSum on f32, f64, i32, i64, bf16 and f16; bf16 and f16 are summed in f32 and rounded
//   once per pairwise addition, as NCCL's reduction kernels do; ncclMax on i32 and i64.
//   Moving data (all-gather, broadcast) takes any type.
#pragma once

#include <cstddef>

#include "emu/runtime.h"

#define NCCL_MAJOR 2
#define NCCL_MINOR 28
#define NCCL_PATCH 9
#define NCCL_VERSION_CODE 22809
#define NCCL_UNIQUE_ID_BYTES 128

typedef struct {
  char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

typedef struct ncclComm* ncclComm_t;

typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7,
  ncclNumResults = 8
} ncclResult_t;

typedef enum { ncclSum = 0, ncclProd = 1, ncclMax = 2, ncclMin = 3, ncclAvg = 4, ncclNumOps = 5 } ncclRedOp_t;

typedef enum {
  ncclInt8 = 0,
  ncclChar = 0,
  ncclUint8 = 1,
  ncclInt32 = 2,
  ncclInt = 2,
  ncclUint32 = 3,
  ncclInt64 = 4,
  ncclUint64 = 5,
  ncclFloat16 = 6,
  ncclHalf = 6,
  ncclFloat32 = 7,
  ncclFloat = 7,
  ncclFloat64 = 8,
  ncclDouble = 8,
  ncclBfloat16 = 9,
  ncclFloat8e4m3 = 10,
  ncclFloat8e5m2 = 11,
  ncclNumTypes = 12
} ncclDataType_t;

ncclResult_t ncclGetVersion(int* version);
ncclResult_t ncclGetUniqueId(ncclUniqueId* unique_id);
ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId comm_id, int rank);
ncclResult_t ncclCommDestroy(ncclComm_t comm);
ncclResult_t ncclCommAbort(ncclComm_t comm);
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* async_error);
ncclResult_t ncclCommCount(const ncclComm_t comm, int* count);
ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank);
const char* ncclGetErrorString(ncclResult_t result);
const char* ncclGetLastError(ncclComm_t comm);

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                           ncclComm_t comm, cudaStream_t stream);
