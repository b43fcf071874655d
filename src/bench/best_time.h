// How the bench's peak measurements time a call: one untimed call (first touch, lazy initialisation, the
// library's choice of kernel), then the best of `reps` timed ones, which is the machine's rate with the
// least interference from anything else running.
#pragma once

#include <algorithm>
#include <chrono>

namespace gpt::bench {

template <class F>
double best_seconds_of(int reps, F&& call) {
  call();
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const auto start = std::chrono::steady_clock::now();
    call();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return best;
}

}  // namespace gpt::bench
