// The one include for NCCL in our sources: the library's nccl.h in a GPU build, cuda/emu's emulation
// over MPI in the emulator build (GPT_CUDA_EMU), so cuda/comm has one source for both. NCCL_CHECK names
// the failed statement, file, line, NCCL's message and its last error's detail.
#pragma once

#include "core/error.h"

#if defined(GPT_CUDA_EMU)
#include "emu/nccl.h"
#else
#include <nccl.h>
#endif

#define NCCL_CHECK(stmt)                                                                               \
  do {                                                                                                 \
    const ncclResult_t gpt_nccl_status_ = (stmt);                                                      \
    if (gpt_nccl_status_ != ncclSuccess)                                                               \
      ::gpt::throw_error(__FILE__, __LINE__, fmt::format("NCCL error in {}: {} ({})", #stmt,           \
                                                         ncclGetErrorString(gpt_nccl_status_),         \
                                                         ncclGetLastError(nullptr)));                  \
  } while (0)
