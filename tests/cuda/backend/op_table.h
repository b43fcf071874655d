// The cross-backend op table, in the spirit of ggml's test-backend-ops: one list of cases (every op x
// every format it supports x shapes that are not multiples of any tile), each run on the CPU backend and
// on the CUDA backend (the emulator in CI, the GPU when there is one) from the same fresh random inputs.
// Outputs are poisoned (0xFF bytes: NaN in every float format) before the call, so an element an op
// forgets to write fails; then every output is checked for NaN/Inf where the CPU has a finite value, and
// its error against the per-format tolerance of op_table.cpp (the one place tolerances are kept).
//
// A case is a function of an OpBench: it asks the bench for its tensors and calls one op on
// bench.backend(). The harness calls it once per backend with the same seed, so both runs draw the same
// values, and compares what the two runs produced, output by output, in the order the case asked for them.
// Family files (cases_*.cpp) register their cases with OpCases.
#pragma once

#include "backend/backend.h"

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

namespace gpt::test {

class OpBench {
 public:
  OpBench(Backend& backend, uint64_t seed);
  ~OpBench();
  OpBench(const OpBench&) = delete;
  OpBench& operator=(const OpBench&) = delete;

  Backend& backend() { return backend_; }

  // Random values uniform in [lo, hi] (an FP8 tensor's codes: the values are code * scale_inv), drawn
  // on the host and stored with the CPU's rounding, so both backends read the same bits.
  Tensor input(std::initializer_list<int64_t> shape, DType dtype, float lo = -1.0f, float hi = 1.0f);
  // i32 tokens uniform in [0, vocab); with ignore_every > 0, every ignore_every-th one is -1 (a target the
  // loss skips).
  Tensor tokens(std::initializer_list<int64_t> shape, int vocab, int ignore_every = 0);
  // Written by the op: poisoned, compared. error_scale: the magnitude its errors are measured against is
  // at least this (a row's mean, which cancels towards zero, errs by the size of what it sums, and in a
  // one-row output its own magnitude is no measure).
  Tensor output(std::initializer_list<int64_t> shape, DType dtype, double error_scale = 0.0);
  // Accumulated into by the op (+=): random start, compared.
  Tensor accumulated(std::initializer_list<int64_t> shape, DType dtype, float lo = -1.0f, float hi = 1.0f);
  // Working memory of the op: poisoned, not compared.
  Tensor scratch(std::initializer_list<int64_t> shape, DType dtype);
  // FP8 scaling state in backend memory (amax and counts zero); compared after the op. Attach it to a
  // tensor with t.scaling = meta.
  Fp8Meta* fp8_meta(float scale);

  // What the run left, for the harness.
  struct Result {
    std::string name;         // "output 0 (bf16 (67,200))", "fp8 state 1"
    DType dtype = DType::F32;
    std::vector<double> values;  // decoded (FP8: unscaled codes' values)
    double error_scale = 0.0;    // output()'s
  };
  std::vector<Result> results();

 private:
  struct Held;
  Tensor make(std::initializer_list<int64_t> shape, DType dtype, int role);
  Backend& backend_;
  uint64_t seed_;
  std::vector<std::unique_ptr<Held>> held_;
};

struct OpCase {
  std::string name;  // op/format/shape, unique: the test's parameter name
  std::function<void(OpBench&)> run;
  // Multiplies the output format's tolerance: a long FP32 reduction (a K=1000 product) errs more; 0 asks
  // for the CPU's bits exactly (adamw_update, whose every rounding both backends fix).
  double tolerance_scale = 1.0;
};

std::vector<OpCase>& op_cases();

struct OpCases {
  explicit OpCases(std::vector<OpCase> cases);
};

// The formats the table runs float ops in.
inline constexpr DType kTableFormats[] = {DType::F32, DType::BF16, DType::F16, DType::E4M3, DType::E5M2};

// "f32", "bf16", ... for case names.
std::string format_tag(DType dtype);

// The element-wise families' shapes (gelu, residual, adamw): one element, odd lengths (the kernels'
// scalar tails) and a matrix.
struct ElementwiseShape {
  const char* tag;
  std::initializer_list<int64_t> dims;
};
inline const ElementwiseShape kElementwiseShapes[] = {{"n1", {1}}, {"n67", {67}}, {"n4099", {4099}}, {"67x200", {67, 200}}};

}  // namespace gpt::test
