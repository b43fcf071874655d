// A request to stop training at the next step boundary. The train command's SIGINT/SIGTERM handler sets
// it (an atomic store is async-signal-safe); Trainer::run polls it after each step, writes a checkpoint
// and returns with TrainStatus::Interrupted. Library code never exits the process.
#pragma once

#include <atomic>

namespace gpt {

// 0: no request; otherwise the number of the signal that asked, or -1 for a request made in code.
inline std::atomic<int> g_stop_request{0};
static_assert(std::atomic<int>::is_always_lock_free, "the stop flag is set from a signal handler");

inline void request_stop(int signal_number = -1) { g_stop_request.store(signal_number, std::memory_order_relaxed); }
inline bool stop_requested() { return g_stop_request.load(std::memory_order_relaxed) != 0; }
inline int stop_signal() { return g_stop_request.load(std::memory_order_relaxed); }
inline void clear_stop_request() { g_stop_request.store(0, std::memory_order_relaxed); }

}  // namespace gpt
