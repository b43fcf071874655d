// The per-block scheduler's interface to the emulator's primitives (device.h, tensor_core.cpp): the
// generic warp collective every shuffle, vote, ldmatrix and mma is built on, and per-thread cp.async state.
#pragma once

#include <cstddef>
#include <cstdint>

namespace gpt::cuda::emu::detail {

inline constexpr int kWarpSize = 32;

// One lane's part in a warp collective: what it brings (in, arg) and, once every lane of the mask has
// arrived, what it gets (out).
struct LaneSlot {
  alignas(16) unsigned char in[64];
  alignas(16) unsigned char out[32];
  int arg;
};

// combine() runs once, when the last lane of the mask arrives: lanes[i] is lane i's slot, nullptr for a
// lane outside the mask (or past the end of a partial warp).
using Combine = void (*)(LaneSlot* const* lanes, unsigned mask, int common);
struct CollectiveOp {
  const char* name;
  Combine combine;
  int common;  // a parameter every lane must pass alike (a shuffle's width, an ldmatrix's count)
};

LaneSlot& lane_slot();
unsigned lane_id();
// Blocks the calling thread until every lane of `mask` in its warp has called the same op with the
// same mask; checks that the caller is in the mask and that the mask names only lanes that exist.
void warp_collective(unsigned mask, const CollectiveOp& op);

// An instruction that exists from compute capability `needed` (major * 10 + minor) on: on an emulated
// device older than that the kernel fails, as its launch on such a GPU would (a GPU build holds no such
// instruction in that device's code; our kernels trap there instead, common/mma.cuh).
void require_compute_capability(int needed, const char* instruction);

// cp.async (compute capability 8.0): the copy is made at the latest moment the PTX ISA allows, the cp.async.wait_group that
// covers it, so a kernel reading its destination before waiting reads stale data.
void cp_async(void* dst, const void* src, size_t bytes, size_t src_bytes);
void cp_async_commit();
void cp_async_wait(int newest_groups_left);

}  // namespace gpt::cuda::emu::detail
