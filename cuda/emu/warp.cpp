// Warp shuffles, votes, redux and __syncwarp as rendezvous of the lanes in their mask (emu/scheduler.h).
//
// Shuffles follow the PTX ISA's shfl.sync pseudocode (9.7.9.6): with the segment mask of CUDA's width
// argument, segmask = ~(width - 1) & 31,
//   maxLane = (lane & segmask) | (clamp & ~segmask),  minLane = lane & segmask,
//   idx:  j = minLane | (src & ~segmask), valid if j <= maxLane      (clamp 31)
//   up:   j = lane - delta,               valid if j >= maxLane      (clamp 0)
//   down: j = lane + delta,               valid if j <= maxLane      (clamp 31)
//   bfly: j = lane ^ laneMask,            valid if j <= maxLane      (clamp 31)
// and an invalid j reads the lane's own value. Reading a lane outside the mask is undefined in CUDA; the
// emulator returns 0xFF bytes (NaN as a float) so a result that depends on it shows.
#include <cstring>

#include "core/error.h"
#include "emu/device.h"
#include "emu/scheduler.h"

namespace gpt::cuda::emu::detail {
namespace {

constexpr uint64_t kUndefined = ~uint64_t{0};

uint64_t value_of(const LaneSlot* s) {
  uint64_t v;
  std::memcpy(&v, s->in, sizeof v);
  return v;
}
void set_out(LaneSlot* s, uint64_t v) { std::memcpy(s->out, &v, sizeof v); }

template <ShuffleMode kMode>
void combine_shuffle(LaneSlot* const* lanes, unsigned mask, int width) {
  const int segmask = ~(width - 1) & 31;
  const int clamp = kMode == ShuffleMode::kUp ? 0 : 31;
  for (int lane = 0; lane < kWarpSize; ++lane) {
    if (!(mask & (1u << lane))) continue;
    const int b = lanes[lane]->arg & 31;  // bval[4:0]
    const int max_lane = (lane & segmask) | (clamp & ~segmask), min_lane = lane & segmask;
    int j = lane;
    bool valid = true;
    switch (kMode) {
      case ShuffleMode::kIdx: j = min_lane | (b & ~segmask); valid = j <= max_lane; break;
      case ShuffleMode::kUp: j = lane - b; valid = j >= max_lane; break;
      case ShuffleMode::kDown: j = lane + b; valid = j <= max_lane; break;
      case ShuffleMode::kXor: j = lane ^ b; valid = j <= max_lane; break;
    }
    if (!valid) j = lane;
    set_out(lanes[lane], j >= 0 && j < kWarpSize && lanes[j] != nullptr ? value_of(lanes[j]) : kUndefined);
  }
}

template <VoteMode kMode>
void combine_vote(LaneSlot* const* lanes, unsigned mask, int) {
  unsigned ballot = 0;
  for (int lane = 0; lane < kWarpSize; ++lane)
    if ((mask & (1u << lane)) && lanes[lane]->arg != 0) ballot |= 1u << lane;
  const uint64_t result = kMode == VoteMode::kBallot ? ballot
                          : kMode == VoteMode::kAny  ? (ballot != 0)
                                                     : (ballot == mask);
  for (int lane = 0; lane < kWarpSize; ++lane)
    if (mask & (1u << lane)) set_out(lanes[lane], result);
}

template <ReduceMode kMode, bool kSigned>
void combine_reduce(LaneSlot* const* lanes, unsigned mask, int) {
  bool first = true;
  uint32_t acc = 0;
  for (int lane = 0; lane < kWarpSize; ++lane) {
    if (!(mask & (1u << lane))) continue;
    const auto v = static_cast<uint32_t>(value_of(lanes[lane]));
    if (first) {
      acc = v;
      first = false;
      continue;
    }
    const auto sv = static_cast<int32_t>(v), sa = static_cast<int32_t>(acc);
    switch (kMode) {
      case ReduceMode::kAdd: acc += v; break;
      case ReduceMode::kMin: acc = kSigned ? static_cast<uint32_t>(sv < sa ? sv : sa) : (v < acc ? v : acc); break;
      case ReduceMode::kMax: acc = kSigned ? static_cast<uint32_t>(sv > sa ? sv : sa) : (v > acc ? v : acc); break;
      case ReduceMode::kAnd: acc &= v; break;
      case ReduceMode::kOr: acc |= v; break;
      case ReduceMode::kXor: acc ^= v; break;
    }
  }
  for (int lane = 0; lane < kWarpSize; ++lane)
    if (mask & (1u << lane)) set_out(lanes[lane], acc);
}

void combine_nothing(LaneSlot* const*, unsigned, int) {}

template <Combine kCombine>
uint64_t run(unsigned mask, const char* name, int common, uint64_t value, int arg) {
  LaneSlot& slot = lane_slot();
  std::memcpy(slot.in, &value, sizeof value);
  slot.arg = arg;
  warp_collective(mask, {name, kCombine, common});
  uint64_t out;
  std::memcpy(&out, slot.out, sizeof out);
  return out;
}

}  // namespace

void syncwarp(unsigned mask) { run<combine_nothing>(mask, "__syncwarp", 0, 0, 0); }

uint64_t shuffle(unsigned mask, ShuffleMode mode, uint64_t value, int lane_arg, int width) {
  GPT_CHECK(width >= 1 && width <= kWarpSize && (width & (width - 1)) == 0,
            "warp shuffle width {} is not a power of two in [1, 32]", width);
  switch (mode) {
    case ShuffleMode::kIdx: return run<combine_shuffle<ShuffleMode::kIdx>>(mask, "__shfl_sync", width, value, lane_arg);
    case ShuffleMode::kUp: return run<combine_shuffle<ShuffleMode::kUp>>(mask, "__shfl_up_sync", width, value, lane_arg);
    case ShuffleMode::kDown:
      return run<combine_shuffle<ShuffleMode::kDown>>(mask, "__shfl_down_sync", width, value, lane_arg);
    case ShuffleMode::kXor:
      return run<combine_shuffle<ShuffleMode::kXor>>(mask, "__shfl_xor_sync", width, value, lane_arg);
  }
  GPT_FAIL("unknown shuffle mode");
}

unsigned vote(unsigned mask, VoteMode mode, int predicate) {
  switch (mode) {
    case VoteMode::kBallot:
      return static_cast<unsigned>(run<combine_vote<VoteMode::kBallot>>(mask, "__ballot_sync", 0, 0, predicate));
    case VoteMode::kAny: return static_cast<unsigned>(run<combine_vote<VoteMode::kAny>>(mask, "__any_sync", 0, 0, predicate));
    case VoteMode::kAll: return static_cast<unsigned>(run<combine_vote<VoteMode::kAll>>(mask, "__all_sync", 0, 0, predicate));
  }
  GPT_FAIL("unknown vote mode");
}

uint32_t warp_reduce(unsigned mask, ReduceMode mode, uint32_t value, bool is_signed) {
#define GPT_EMU_REDUCE_CASE(m, name)                                                                  \
  case ReduceMode::m:                                                                                 \
    return static_cast<uint32_t>(is_signed ? run<combine_reduce<ReduceMode::m, true>>(mask, name, 1, value, 0) \
                                           : run<combine_reduce<ReduceMode::m, false>>(mask, name, 0, value, 0));
  switch (mode) {
    GPT_EMU_REDUCE_CASE(kAdd, "__reduce_add_sync")
    GPT_EMU_REDUCE_CASE(kMin, "__reduce_min_sync")
    GPT_EMU_REDUCE_CASE(kMax, "__reduce_max_sync")
    GPT_EMU_REDUCE_CASE(kAnd, "__reduce_and_sync")
    GPT_EMU_REDUCE_CASE(kOr, "__reduce_or_sync")
    GPT_EMU_REDUCE_CASE(kXor, "__reduce_xor_sync")
  }
#undef GPT_EMU_REDUCE_CASE
  GPT_FAIL("unknown warp reduction");
}

}  // namespace gpt::cuda::emu::detail
