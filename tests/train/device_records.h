// What a run's metrics.jsonl says of device memory (src/train/trainer.cpp), for the tests of a backend with
// memory of its own (the CUDA backend's).
#pragma once

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <optional>
#include <string>
#include <vector>

namespace gpt::test {

// The device memory a run's metrics.jsonl records: the ledger's total and the device's size (first step),
// and per step what the run holds and what the device has in use (cudaMemGetInfo).
struct DeviceRecords {
  std::optional<double> planned, total;
  std::vector<double> held, used;
  size_t steps = 0;
};

inline DeviceRecords device_records(const std::string& run_dir) {
  DeviceRecords out;
  std::ifstream in(run_dir + "/metrics.jsonl");
  std::string line;
  while (std::getline(in, line)) {
    const nlohmann::json r = nlohmann::json::parse(line);
    if (r.contains("memory_planned_bytes")) out.planned = r["memory_planned_bytes"].get<double>();
    if (r.contains("device_total_bytes")) out.total = r["device_total_bytes"].get<double>();
    if (!r.contains("loss")) continue;
    ++out.steps;
    if (r.contains("device_held_bytes")) out.held.push_back(r["device_held_bytes"].get<double>());
    if (r.contains("device_used_bytes")) out.used.push_back(r["device_used_bytes"].get<double>());
  }
  return out;
}

// Nothing is allocated inside a step: each of the run's `steps` records holds the ledger's total on the
// device, and the device's own count is at least that and at most its size.
inline void expect_device_held_as_planned(const std::string& run_dir, size_t steps) {
  const DeviceRecords d = device_records(run_dir);
  ASSERT_TRUE(d.planned.has_value()) << run_dir;
  ASSERT_TRUE(d.total.has_value()) << run_dir;
  ASSERT_EQ(d.steps, steps) << run_dir;
  ASSERT_EQ(d.held.size(), steps) << run_dir;
  ASSERT_EQ(d.used.size(), steps) << run_dir;
  for (size_t i = 0; i < steps; ++i) {
    EXPECT_EQ(d.held[i], *d.planned) << run_dir << " step " << i + 1;
    EXPECT_GE(d.used[i], d.held[i]) << run_dir << " step " << i + 1;
    EXPECT_LE(d.used[i], *d.total) << run_dir << " step " << i + 1;
  }
}

}  // namespace gpt::test
