// The time left in a run, from the mean of its recent step times. The first steps (warm-up, page faults,
// a cold cache) and an hour when other processes held the cores say little about the next steps, so the
// average since the start would mislead for as long as the run is young or the machine changed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>

namespace gpt {

class StepEta {
 public:
  explicit StepEta(size_t window) : window_(window) {}

  void add_step_ms(double ms);
  // Seconds for `remaining` more steps at the mean of the last `window` step times; 0 before any step.
  double seconds_left(int64_t remaining) const;

 private:
  size_t window_;
  std::deque<double> recent_ms_;
  double sum_ms_ = 0.0;
};

}  // namespace gpt
