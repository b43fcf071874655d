// What a run's metrics.jsonl says of device memory (src/train/trainer.cpp), for the tests of a backend with
// memory of its own (the CUDA backend's).
#pragma once

#include "test_util.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <string>

namespace gpt::test {

// The ledger's total and the device's size (the first step's memory record), and per step what the run
// holds and what the device has in use (cudaMemGetInfo).
struct DeviceRecords {
  std::map<int64_t, double> planned, total, held, used;
  size_t steps = 0;
};

inline DeviceRecords device_records(const std::string& run_dir) {
  return {logged_metric(run_dir, "memory_planned_bytes"), logged_metric(run_dir, "device_total_bytes"),
          logged_metric(run_dir, "device_held_bytes"), logged_metric(run_dir, "device_used_bytes"),
          logged_losses(run_dir).size()};
}

// Nothing is allocated inside a step: each of the run's `steps` records holds the ledger's total on the
// device, and the device's own count is at least that and at most its size.
inline void expect_device_held_as_planned(const std::string& run_dir, size_t steps) {
  const DeviceRecords d = device_records(run_dir);
  ASSERT_EQ(d.planned.size(), 1u) << run_dir;
  ASSERT_EQ(d.total.size(), 1u) << run_dir;
  ASSERT_EQ(d.steps, steps) << run_dir;
  ASSERT_EQ(d.held.size(), steps) << run_dir;
  ASSERT_EQ(d.used.size(), steps) << run_dir;
  const double planned = d.planned.begin()->second, total = d.total.begin()->second;
  for (const auto& [step, held] : d.held) {
    EXPECT_EQ(held, planned) << run_dir << " step " << step;
    EXPECT_GE(d.used.at(step), held) << run_dir << " step " << step;
    EXPECT_LE(d.used.at(step), total) << run_dir << " step " << step;
  }
}

}  // namespace gpt::test
