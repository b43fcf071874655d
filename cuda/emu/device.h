// The device side of the CUDA emulator: keywords, built-in variables, barriers, warp primitives, atomics
// and the integer and cache-hint intrinsics, with the semantics of the CUDA Programming Guide.
//
// A block's threads are fibers on one host thread (emu/scheduler.cpp), so:
// - threadIdx/blockIdx/blockDim/gridDim are host-thread-local, set by the scheduler before it resumes a
//   thread; `__shared__` is `thread_local`, one instance per host thread, which is one per running block
//   because a host thread runs one block at a time, to completion. It is not poisoned between blocks.
// - __syncthreads, __syncwarp and every warp collective are switch points: the thread waits there until
//   the threads it synchronises with arrive, and the order in which ready threads then run is shuffled
//   from a seed. Between switch points a thread runs alone, so a race needs a missing barrier to show
//   (which the shuffled order exposes), not an interleaving inside straight-line code.
// - warp collectives are a rendezvous of exactly the lanes in their mask, per warp.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "emu/vector_types.h"

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __grid_constant__
#define __align__(n) __attribute__((aligned(n)))
#define __shared__ thread_local
#define __constant__ inline

inline thread_local uint3 threadIdx;
inline thread_local uint3 blockIdx;
inline thread_local dim3 blockDim;
inline thread_local dim3 gridDim;
// A variable, not a constant, as in CUDA: code that needs warpSize at compile time fails here too.
extern const int warpSize;

namespace gpt::cuda::emu::detail {

enum class ShuffleMode : int { kIdx, kUp, kDown, kXor };
enum class VoteMode : int { kBallot, kAny, kAll };
enum class ReduceMode : int { kAdd, kMin, kMax, kAnd, kOr, kXor };
enum class BarrierMode : int { kPlain, kCount, kAnd, kOr };

int syncthreads(int predicate, BarrierMode mode);
void syncwarp(unsigned mask);
uint64_t shuffle(unsigned mask, ShuffleMode mode, uint64_t value, int lane_arg, int width);
unsigned vote(unsigned mask, VoteMode mode, int predicate);
uint32_t warp_reduce(unsigned mask, ReduceMode mode, uint32_t value, bool is_signed);
[[noreturn]] void trap();

template <class T>
uint64_t to_bits(const T& v) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= 8, "warp shuffles move at most 8 bytes");
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  return bits;
}
template <class T>
T from_bits(uint64_t bits) {
  T v;
  std::memcpy(&v, &bits, sizeof(T));
  return v;
}

}  // namespace gpt::cuda::emu::detail

inline void __syncthreads() { gpt::cuda::emu::detail::syncthreads(0, gpt::cuda::emu::detail::BarrierMode::kPlain); }
inline int __syncthreads_count(int p) {
  return gpt::cuda::emu::detail::syncthreads(p, gpt::cuda::emu::detail::BarrierMode::kCount);
}
inline int __syncthreads_and(int p) {
  return gpt::cuda::emu::detail::syncthreads(p, gpt::cuda::emu::detail::BarrierMode::kAnd);
}
inline int __syncthreads_or(int p) {
  return gpt::cuda::emu::detail::syncthreads(p, gpt::cuda::emu::detail::BarrierMode::kOr);
}
inline void __syncwarp(unsigned mask = 0xffffffffu) { gpt::cuda::emu::detail::syncwarp(mask); }

template <class T>
T __shfl_sync(unsigned mask, T var, int src_lane, int width = warpSize) {
  using namespace gpt::cuda::emu::detail;
  return from_bits<T>(shuffle(mask, ShuffleMode::kIdx, to_bits(var), src_lane, width));
}
template <class T>
T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = warpSize) {
  using namespace gpt::cuda::emu::detail;
  return from_bits<T>(shuffle(mask, ShuffleMode::kUp, to_bits(var), static_cast<int>(delta), width));
}
template <class T>
T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = warpSize) {
  using namespace gpt::cuda::emu::detail;
  return from_bits<T>(shuffle(mask, ShuffleMode::kDown, to_bits(var), static_cast<int>(delta), width));
}
template <class T>
T __shfl_xor_sync(unsigned mask, T var, int lane_mask, int width = warpSize) {
  using namespace gpt::cuda::emu::detail;
  return from_bits<T>(shuffle(mask, ShuffleMode::kXor, to_bits(var), lane_mask, width));
}
inline unsigned __ballot_sync(unsigned mask, int p) {
  return gpt::cuda::emu::detail::vote(mask, gpt::cuda::emu::detail::VoteMode::kBallot, p);
}
inline int __any_sync(unsigned mask, int p) {
  return static_cast<int>(gpt::cuda::emu::detail::vote(mask, gpt::cuda::emu::detail::VoteMode::kAny, p));
}
inline int __all_sync(unsigned mask, int p) {
  return static_cast<int>(gpt::cuda::emu::detail::vote(mask, gpt::cuda::emu::detail::VoteMode::kAll, p));
}

// sm_80's redux.sync: the reduction of one 32-bit integer over the lanes of the mask.
#define GPT_EMU_REDUX(name, mode)                                                                  \
  inline unsigned name(unsigned mask, unsigned v) {                                                \
    return gpt::cuda::emu::detail::warp_reduce(mask, gpt::cuda::emu::detail::ReduceMode::mode, v, false); \
  }                                                                                                \
  inline int name(unsigned mask, int v) {                                                          \
    return static_cast<int>(gpt::cuda::emu::detail::warp_reduce(                                   \
        mask, gpt::cuda::emu::detail::ReduceMode::mode, static_cast<uint32_t>(v), true));          \
  }
GPT_EMU_REDUX(__reduce_add_sync, kAdd)
GPT_EMU_REDUX(__reduce_min_sync, kMin)
GPT_EMU_REDUX(__reduce_max_sync, kMax)
#undef GPT_EMU_REDUX
inline unsigned __reduce_and_sync(unsigned mask, unsigned v) {
  return gpt::cuda::emu::detail::warp_reduce(mask, gpt::cuda::emu::detail::ReduceMode::kAnd, v, false);
}
inline unsigned __reduce_or_sync(unsigned mask, unsigned v) {
  return gpt::cuda::emu::detail::warp_reduce(mask, gpt::cuda::emu::detail::ReduceMode::kOr, v, false);
}
inline unsigned __reduce_xor_sync(unsigned mask, unsigned v) {
  return gpt::cuda::emu::detail::warp_reduce(mask, gpt::cuda::emu::detail::ReduceMode::kXor, v, false);
}

// Atomics are relaxed read-modify-writes of device memory, as CUDA's are; blocks run on several host
// threads, so they must be real atomics. Each returns the old value.
#define GPT_EMU_ATOMIC(name, T, expr)                                                              \
  inline T name(T* address, T val) {                                                               \
    std::atomic_ref<T> a(*address);                                                                \
    return expr;                                                                                   \
  }
GPT_EMU_ATOMIC(atomicAdd, int, a.fetch_add(val, std::memory_order_relaxed))
GPT_EMU_ATOMIC(atomicAdd, unsigned int, a.fetch_add(val, std::memory_order_relaxed))
GPT_EMU_ATOMIC(atomicAdd, unsigned long long, a.fetch_add(val, std::memory_order_relaxed))
GPT_EMU_ATOMIC(atomicAdd, float, a.fetch_add(val, std::memory_order_relaxed))
GPT_EMU_ATOMIC(atomicAdd, double, a.fetch_add(val, std::memory_order_relaxed))
GPT_EMU_ATOMIC(atomicSub, int, a.fetch_sub(val, std::memory_order_relaxed))
GPT_EMU_ATOMIC(atomicSub, unsigned int, a.fetch_sub(val, std::memory_order_relaxed))
GPT_EMU_ATOMIC(atomicExch, int, a.exchange(val, std::memory_order_relaxed))
GPT_EMU_ATOMIC(atomicExch, unsigned int, a.exchange(val, std::memory_order_relaxed))
GPT_EMU_ATOMIC(atomicExch, unsigned long long, a.exchange(val, std::memory_order_relaxed))
GPT_EMU_ATOMIC(atomicExch, float, a.exchange(val, std::memory_order_relaxed))
GPT_EMU_ATOMIC(atomicAnd, int, a.fetch_and(val, std::memory_order_relaxed))
GPT_EMU_ATOMIC(atomicAnd, unsigned int, a.fetch_and(val, std::memory_order_relaxed))
GPT_EMU_ATOMIC(atomicAnd, unsigned long long, a.fetch_and(val, std::memory_order_relaxed))
GPT_EMU_ATOMIC(atomicOr, int, a.fetch_or(val, std::memory_order_relaxed))
GPT_EMU_ATOMIC(atomicOr, unsigned int, a.fetch_or(val, std::memory_order_relaxed))
GPT_EMU_ATOMIC(atomicOr, unsigned long long, a.fetch_or(val, std::memory_order_relaxed))
GPT_EMU_ATOMIC(atomicXor, int, a.fetch_xor(val, std::memory_order_relaxed))
GPT_EMU_ATOMIC(atomicXor, unsigned int, a.fetch_xor(val, std::memory_order_relaxed))
GPT_EMU_ATOMIC(atomicXor, unsigned long long, a.fetch_xor(val, std::memory_order_relaxed))
#undef GPT_EMU_ATOMIC

#define GPT_EMU_ATOMIC_MINMAX(name, T, better)                                                     \
  inline T name(T* address, T val) {                                                               \
    std::atomic_ref<T> a(*address);                                                                \
    T old = a.load(std::memory_order_relaxed);                                                     \
    while ((val better old) && !a.compare_exchange_weak(old, val, std::memory_order_relaxed)) {    \
    }                                                                                              \
    return old;                                                                                    \
  }
GPT_EMU_ATOMIC_MINMAX(atomicMax, int, >)
GPT_EMU_ATOMIC_MINMAX(atomicMax, unsigned int, >)
GPT_EMU_ATOMIC_MINMAX(atomicMax, long long, >)
GPT_EMU_ATOMIC_MINMAX(atomicMax, unsigned long long, >)
GPT_EMU_ATOMIC_MINMAX(atomicMin, int, <)
GPT_EMU_ATOMIC_MINMAX(atomicMin, unsigned int, <)
GPT_EMU_ATOMIC_MINMAX(atomicMin, long long, <)
GPT_EMU_ATOMIC_MINMAX(atomicMin, unsigned long long, <)
#undef GPT_EMU_ATOMIC_MINMAX

#define GPT_EMU_ATOMIC_CAS(T)                                                                      \
  inline T atomicCAS(T* address, T compare, T val) {                                               \
    std::atomic_ref<T>(*address).compare_exchange_strong(compare, val, std::memory_order_relaxed); \
    return compare;                                                                                \
  }
GPT_EMU_ATOMIC_CAS(int)
GPT_EMU_ATOMIC_CAS(unsigned int)
GPT_EMU_ATOMIC_CAS(unsigned long long)
GPT_EMU_ATOMIC_CAS(unsigned short)
#undef GPT_EMU_ATOMIC_CAS

// atomicInc/atomicDec: ((old >= val) ? 0 : old + 1) and ((old == 0 || old > val) ? val : old - 1).
inline unsigned atomicInc(unsigned* address, unsigned val) {
  std::atomic_ref<unsigned> a(*address);
  unsigned old = a.load(std::memory_order_relaxed);
  while (!a.compare_exchange_weak(old, old >= val ? 0u : old + 1, std::memory_order_relaxed)) {
  }
  return old;
}
inline unsigned atomicDec(unsigned* address, unsigned val) {
  std::atomic_ref<unsigned> a(*address);
  unsigned old = a.load(std::memory_order_relaxed);
  while (!a.compare_exchange_weak(old, (old == 0 || old > val) ? val : old - 1, std::memory_order_relaxed)) {
  }
  return old;
}

inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline void __threadfence_block() { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline void __threadfence_system() { std::atomic_thread_fence(std::memory_order_seq_cst); }
[[noreturn]] inline void __trap() { gpt::cuda::emu::detail::trap(); }

// Cache-hinted loads and stores: the hint changes only caching on a GPU, never the value.
template <class T> T __ldg(const T* p) { return *p; }
template <class T> T __ldca(const T* p) { return *p; }
template <class T> T __ldcg(const T* p) { return *p; }
template <class T> T __ldcs(const T* p) { return *p; }
template <class T> T __ldlu(const T* p) { return *p; }
template <class T> T __ldcv(const T* p) { return *p; }
template <class T> void __stwb(T* p, T v) { *p = v; }
template <class T> void __stcg(T* p, T v) { *p = v; }
template <class T> void __stcs(T* p, T v) { *p = v; }
template <class T> void __stwt(T* p, T v) { *p = v; }

inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz(static_cast<unsigned>(x)); }
inline int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll(static_cast<unsigned long long>(x)); }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __ffsll(long long x) { return __builtin_ffsll(x); }
inline unsigned __brev(unsigned x) {
  x = ((x >> 1) & 0x55555555u) | ((x & 0x55555555u) << 1);
  x = ((x >> 2) & 0x33333333u) | ((x & 0x33333333u) << 2);
  x = ((x >> 4) & 0x0F0F0F0Fu) | ((x & 0x0F0F0F0Fu) << 4);
  return __builtin_bswap32(x);
}
inline unsigned __umulhi(unsigned a, unsigned b) {
  return static_cast<unsigned>((static_cast<uint64_t>(a) * b) >> 32);
}
inline int __mulhi(int a, int b) { return static_cast<int>((static_cast<int64_t>(a) * b) >> 32); }

// CUDA's global min/max overloads of device code for the integer types (the float ones are fminf/fmaxf).
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
inline long long min(long long a, long long b) { return a < b ? a : b; }
inline long long max(long long a, long long b) { return a > b ? a : b; }
inline unsigned long long min(unsigned long long a, unsigned long long b) { return a < b ? a : b; }
inline unsigned long long max(unsigned long long a, unsigned long long b) { return a > b ? a : b; }
