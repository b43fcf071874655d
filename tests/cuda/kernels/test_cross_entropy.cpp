// cross_entropy and softmax_forward (cuda/kernels/cross_entropy.cu, softmax.cu) on the emulator: each
// row's max and sum are block reductions in a fixed order (the cross-entropy's an online merge of the
// threads' running normalisers), so losses, dlogits and probabilities are bitwise the same under every
// thread order; and the losses agree with a double-precision log-sum-exp.
#include <gtest/gtest.h>

#include <cmath>

#include "cuda/kernels/row_kernel_test_util.h"
#include "emu/control.h"
#include "kernels/cross_entropy.h"
#include "kernels/softmax.h"

namespace gpt::cuda::test {
namespace {

constexpr int64_t kRows = 4, kVocab = 2999, kPadded = 3008;

std::vector<int32_t> targets() { return {5, -1, 2998, 1234}; }

struct Result {
  std::vector<float> losses, dlogits, probs;
};

Result run(const TestContext& tc) {
  DeviceArray<float> logits(uniform(kRows * kPadded, 1, -6.0f, 6.0f)), dlogits(kRows * kPadded), losses(kRows);
  DeviceArray<float> probs(kRows * kPadded);
  DeviceArray<int32_t> d_targets(targets());
  CrossEntropyArgs a;
  a.losses = device_tensor(losses, {kRows});
  a.dlogits = device_tensor(dlogits, {kRows, kPadded});
  a.logits = device_tensor(logits, {kRows, kPadded});
  a.targets = device_tensor(d_targets, {kRows});
  a.vocab_size = static_cast<int>(kVocab);
  a.dloss = 0.25f;
  cross_entropy(a, tc.ctx);
  softmax_forward({device_tensor(probs, {kRows, kPadded}), device_tensor(logits, {kRows, kPadded})}, tc.ctx);
  return {losses.download(), dlogits.download(), probs.download()};
}

class RowReductions : public EmuTest {};

TEST_F(RowReductions, AreBitwiseReproducibleUnderEveryThreadOrder) {
  const TestContext tc(4);
  emu::set_schedule_seed(0);
  const Result first = run(tc);
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    emu::set_schedule_seed(seed);
    const Result again = run(tc);
    EXPECT_EQ(again.losses, first.losses) << "seed " << seed;
    EXPECT_EQ(again.dlogits, first.dlogits) << "seed " << seed;
    EXPECT_EQ(again.probs, first.probs) << "seed " << seed;
  }
}

TEST_F(RowReductions, CrossEntropyLossIsTheLogSumExpLessTheTargetLogit) {
  const TestContext tc(4);
  const Result got = run(tc);
  const auto logits = uniform(kRows * kPadded, 1, -6.0f, 6.0f);
  const auto y = targets();
  for (int64_t r = 0; r < kRows; ++r) {
    if (y[r] < 0) {
      EXPECT_EQ(got.losses[r], 0.0f);
      for (int64_t j = 0; j < kPadded; ++j) EXPECT_EQ(got.dlogits[r * kPadded + j], 0.0f) << "ignored row " << r;
      continue;
    }
    double m = -INFINITY, s = 0;
    for (int64_t j = 0; j < kVocab; ++j) m = std::max(m, static_cast<double>(logits[r * kPadded + j]));
    for (int64_t j = 0; j < kVocab; ++j) s += std::exp(logits[r * kPadded + j] - m);
    EXPECT_NEAR(got.losses[r], std::log(s) + m - logits[r * kPadded + y[r]], 1e-5) << "row " << r;
    for (int64_t j = kVocab; j < kPadded; ++j) EXPECT_EQ(got.dlogits[r * kPadded + j], 0.0f) << "padding " << j;
  }
}

}  // namespace
}  // namespace gpt::cuda::test
