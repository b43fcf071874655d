// Runs every case of the op table (op_table.h) on the CPU backend and on the CUDA backend and compares.
// Inputs are fresh each run: the seed comes from std::random_device and is printed with any failure;
// GPT_OP_TABLE_SEED=N repeats a run. At the end a table gives, per output format, how many outputs were
// compared and the largest error found, relative to the output's RMS and to the tolerance.
#include "cuda/backend/op_table.h"

#include "backend/cuda_entry.h"
#include "cpu/cpu_backend.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <random>

namespace gpt::test {
namespace {

// The one place the table's tolerances live: |cuda - cpu| <= rtol * (|cpu| + rms(cpu output)). A narrow
// output may differ by one unit in its last place (the two backends' FP32 results differ in the last
// bits and may fall either side of a rounding boundary): 2^-7 for BF16, 2^-10 F16, 2^-3 E4M3, 2^-2 E5M2,
// with margin. FP32 outputs differ only by the order of FP32 arithmetic. A case whose arithmetic both
// backends fix operation by operation asks for 0 (OpCase::tolerance_scale): the CPU's bits exactly.
double relative_tolerance(DType dtype) {
  switch (dtype) {
    case DType::F32: return 1e-5;
    case DType::F64: return 1e-5;
    case DType::BF16: return 1e-2;
    case DType::F16: return 2e-3;
    case DType::E4M3: return 0.13;
    case DType::E5M2: return 0.26;
    default: return 0.0;  // integers: exact
  }
}

struct FormatStats {
  int outputs = 0;
  double max_relative_error = 0.0;  // |cuda - cpu| / (|cpu| + rms), over all elements
  double max_tolerance_used = 0.0;  // that, over the case's tolerance
  std::string worst_case;
};

std::map<std::string, FormatStats>& stats() {
  static std::map<std::string, FormatStats> s;
  return s;
}

class OpTableSummary : public ::testing::Environment {
 public:
  void TearDown() override {
    if (stats().empty()) return;
    std::printf("\nop table: outputs compared and largest errors per format (|cuda-cpu| / (|cpu| + rms))\n");
    std::printf("  %-10s %8s %14s %12s  %s\n", "format", "outputs", "max rel error", "of tolerance", "worst case");
    for (const auto& [format, s] : stats())
      std::printf("  %-10s %8d %14.3g %11.1f%%  %s\n", format.c_str(), s.outputs, s.max_relative_error,
                  100.0 * s.max_tolerance_used, s.worst_case.c_str());
  }
};
const auto* const summary = ::testing::AddGlobalTestEnvironment(new OpTableSummary);

uint64_t table_seed() {
  static const uint64_t seed = []() -> uint64_t {
    if (const char* s = std::getenv("GPT_OP_TABLE_SEED"); s && *s) return std::strtoull(s, nullptr, 10);
    return (static_cast<uint64_t>(std::random_device{}()) << 32) | std::random_device{}();
  }();
  return seed;
}

Backend& cpu_backend() {
  static cpu::CpuBackend cpu(2);
  return cpu;
}

Backend* cuda_backend() {
  static std::unique_ptr<Backend> cuda = cuda::device_count() > 0 ? cuda::make_backend() : nullptr;
  return cuda.get();
}

void compare(const OpCase& c, const OpBench::Result& want, const OpBench::Result& got, uint64_t seed) {
  ASSERT_EQ(want.values.size(), got.values.size()) << want.name;
  const bool is_meta = want.name.rfind("fp8 state", 0) == 0;
  const DType dtype = is_meta ? DType::F32 : want.dtype;
  const double rtol = relative_tolerance(dtype) * c.tolerance_scale;
  double sum_sq = 0.0;
  size_t finite = 0;
  for (double v : want.values)
    if (std::isfinite(v)) sum_sq += v * v, ++finite;
  const double rms = std::max(finite ? std::sqrt(sum_sq / static_cast<double>(finite)) : 0.0, want.error_scale);
  double worst = 0.0;
  int reported = 0;
  for (size_t i = 0; i < want.values.size(); ++i) {
    const double w = want.values[i], g = got.values[i];
    const bool counts = is_meta && i >= 3;
    if (std::isnan(w) || std::isinf(w)) {
      const bool same = std::isnan(w) ? std::isnan(g) : g == w;
      if (!same && reported++ < 5)
        ADD_FAILURE() << c.name << " " << want.name << "[" << i << "]: cpu " << w << ", cuda " << g << " (seed " << seed << ")";
      continue;
    }
    if (!std::isfinite(g)) {
      if (reported++ < 5)
        ADD_FAILURE() << c.name << " " << want.name << "[" << i << "]: cuda " << g << " where cpu has " << w
                      << " (not written, or overflowed; seed " << seed << ")";
      continue;
    }
    const double err = std::fabs(g - w);
    // FP8 counts: a value at a rounding boundary near zero may fall either side when the FP32 results
    // differ in the last bit, so 1% of the count (at least 1) apart.
    const double allowed = counts ? std::max(1.0, 0.01 * std::fabs(w))
                           : dtype == DType::I32 ? 0.0
                                                 : rtol * (std::fabs(w) + rms);
    const double rel = err / (std::fabs(w) + rms + 1e-300);
    if (!counts && dtype != DType::I32) worst = std::max(worst, rel);
    if (err > allowed && reported++ < 5)
      ADD_FAILURE() << c.name << " " << want.name << "[" << i << "]: cpu " << w << ", cuda " << g << ", error " << err
                    << " > allowed " << allowed << " (seed " << seed << ")";
  }
  if (is_meta) return;
  FormatStats& s = stats()[std::string(dtype_name(dtype))];
  ++s.outputs;
  if (worst > s.max_relative_error) s.max_relative_error = worst, s.worst_case = c.name;
  if (rtol > 0) s.max_tolerance_used = std::max(s.max_tolerance_used, worst / rtol);
}

class BackendOps : public ::testing::TestWithParam<size_t> {};

TEST_P(BackendOps, CudaMatchesCpu) {
  const OpCase& c = op_cases()[GetParam()];
  Backend* cuda = cuda_backend();
  if (!cuda) GTEST_SKIP() << "no CUDA device (" << cuda::describe() << "); gpt_cuda_emu_tests runs this table on the emulator";
  const uint64_t seed = table_seed() + GetParam();
  OpBench cpu_run(cpu_backend(), seed);
  c.run(cpu_run);
  const auto want = cpu_run.results();
  OpBench cuda_run(*cuda, seed);
  c.run(cuda_run);
  const auto got = cuda_run.results();
  ASSERT_EQ(want.size(), got.size());
  ASSERT_FALSE(want.empty()) << c.name << " compares nothing";
  for (size_t i = 0; i < want.size(); ++i) compare(c, want[i], got[i], table_seed());
}

std::string case_name(const ::testing::TestParamInfo<size_t>& info) {
  std::string name = op_cases()[info.param].name;
  for (char& ch : name)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return name;
}

std::vector<size_t> case_indices() {
  std::vector<size_t> idx(op_cases().size());
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
  return idx;
}

INSTANTIATE_TEST_SUITE_P(Table, BackendOps, ::testing::ValuesIn(case_indices()), case_name);

}  // namespace
}  // namespace gpt::test
