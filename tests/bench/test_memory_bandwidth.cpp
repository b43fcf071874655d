// The bench's bandwidth measurement: it streams what it says it streams (a device copy within the scratch
// it is given, never past it, in whole aligned halves), and reports a rate from a positive time. No test
// asserts a rate: only that one was measured.
#include "bench/memory_bandwidth.h"
#include "cpu/cpu_backend.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace gpt {
namespace {

TEST(MemoryBandwidth, TheHostRateIsTheBetterOfTheCopyAndTheUpdateOverTheBuffersItWasGiven) {
  const bench::MemoryBandwidth bw = bench::measure_host_bandwidth((size_t{1} << 20) + 100, 2);
  EXPECT_EQ(bw.buffer_bytes, (size_t{1} << 20) + 100);
  // A copy reads and writes one buffer; the update reads four and writes three.
  EXPECT_TRUE(bw.traffic_bytes == 2 * bw.buffer_bytes || bw.traffic_bytes == 7 * bw.buffer_bytes) << bw.traffic_bytes;
  EXPECT_GT(bw.best_seconds, 0.0);
  EXPECT_DOUBLE_EQ(bw.gbs(), static_cast<double>(bw.traffic_bytes) / bw.best_seconds / 1e9);
  EXPECT_NE(bw.method.find(bw.traffic_bytes == 2 * bw.buffer_bytes ? "a copy" : "update"), std::string::npos) << bw.method;
  EXPECT_NE(bw.method.find("OpenMP threads"), std::string::npos) << bw.method;
}

TEST(MemoryBandwidth, TheDeviceCopyStaysInItsScratchAndCopiesItsFirstHalfIntoTheSecond) {
  cpu::CpuBackend backend;
  // 10,000 bytes of scratch and a guard word after them: halves of 4,864 bytes (19 x 256), the rest untouched.
  std::vector<uint32_t> memory(2501, 0xDEADBEEFu);
  const bench::MemoryBandwidth bw = bench::measure_device_copy_bandwidth(backend, memory.data(), 10000, size_t{1} << 20, 2);
  EXPECT_EQ(bw.buffer_bytes, 4864u);
  EXPECT_EQ(bw.traffic_bytes, 2 * 4864u);
  EXPECT_GT(bw.best_seconds, 0.0);
  float one = 1.0f;
  uint32_t one_bits;
  std::memcpy(&one_bits, &one, sizeof(one_bits));
  for (size_t i = 0; i < 2 * 4864 / 4; ++i) ASSERT_EQ(memory[i], one_bits) << "word " << i;
  for (size_t i = 2 * 4864 / 4; i < memory.size(); ++i) ASSERT_EQ(memory[i], 0xDEADBEEFu) << "word " << i;
  // max_bytes bounds each half.
  EXPECT_EQ(bench::measure_device_copy_bandwidth(backend, memory.data(), 10000, 1000, 1).buffer_bytes, 768u);
  EXPECT_THROW(bench::measure_device_copy_bandwidth(backend, memory.data(), 300, size_t{1} << 20, 1), Error);
}

}  // namespace
}  // namespace gpt
