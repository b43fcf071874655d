// The memory traffic of each Backend op: the bytes its tensors take, counted as a kernel that touches each
// of them exactly once would move them (every input read once, every output written once, an accumulated
// output (+=) read and written, an op's scratch written and read back). It is a lower bound of what the
// op's kernels move, from the shapes and formats alone, so a benchmark can set an op's time beside the
// time those bytes take at the machine's measured bandwidth: a memory-bound op near that bound has nothing
// left to gain but fusion; one far from it moves more than it must, or waits on something else.
//
// Where an op reads only part of a tensor the count is that part: the embedding reads one row of wte per
// token and the rows of wpe for the positions in the batch, a KV-cache step the first `length` rows of each
// head's cache. A scatter into rows (the embedding's gradients) counts a read and a write of one row per
// token, as a kernel that does not know which tokens repeat must. Only the operands and the result of a
// matrix product count (its rate is its FLOPs: bench/flops.h); MatmulArgs::staging is not counted.
#pragma once

#include "backend/backend.h"

#include <cstdint>

namespace gpt {

#define GPT_DECLARE_OP_TRAFFIC(method, Args, op, category) uint64_t op_traffic_bytes(const Args& args);
GPT_BACKEND_OPS(GPT_DECLARE_OP_TRAFFIC)
#undef GPT_DECLARE_OP_TRAFFIC

}  // namespace gpt
