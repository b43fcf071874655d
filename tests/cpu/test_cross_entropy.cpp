// Fused softmax cross-entropy: losses against a direct formula, dlogits against central finite
// differences in double precision, padding columns and ignored rows, aliasing, bad targets.
#include "cpu/gradcheck.h"

#include <gtest/gtest.h>

#include <cmath>

namespace gpt {
namespace {

using test::cpu_backend;
using test::view;

constexpr int64_t kRows = 6, kVocab = 11, kPadded = 16;
constexpr float kDloss = 0.25f;

// Rows 1 and 4 are ignored; padding logits are large so that counting them would show.
std::vector<int32_t> targets() { return {3, -1, 0, 10, -1, 7}; }

std::vector<double> padded_logits(uint32_t seed) {
  std::vector<double> logits = test::random_vector(kRows * kPadded, seed, 2.0);
  for (int64_t r = 0; r < kRows; ++r)
    for (int64_t j = kVocab; j < kPadded; ++j) logits[r * kPadded + j] = 50.0;
  return logits;
}

template <class T, class L>
void run(std::vector<L>& losses, std::vector<T>* dlogits, std::vector<T>& logits, std::vector<int32_t>& tgt) {
  CrossEntropyArgs args;
  args.losses = view(losses, {kRows});
  if (dlogits) args.dlogits = view(*dlogits, {kRows, kPadded});
  args.logits = view(logits, {kRows, kPadded});
  args.targets = view(tgt, {kRows});
  args.vocab_size = static_cast<int>(kVocab);
  args.dloss = kDloss;
  cpu_backend().cross_entropy(args);
}

TEST(CpuCrossEntropy, LossesMatchFormula) {
  std::vector<double> logits = padded_logits(1);
  std::vector<int32_t> tgt = targets();
  std::vector<double> losses(kRows, NAN);
  run(losses, static_cast<std::vector<double>*>(nullptr), logits, tgt);
  for (int64_t r = 0; r < kRows; ++r) {
    if (tgt[r] < 0) {
      EXPECT_EQ(losses[r], 0.0) << "ignored row " << r;
      continue;
    }
    double sum = 0.0;
    for (int64_t j = 0; j < kVocab; ++j) sum += std::exp(logits[r * kPadded + j]);
    EXPECT_NEAR(losses[r], std::log(sum) - logits[r * kPadded + tgt[r]], 1e-13) << "row " << r;
  }
}

TEST(CpuCrossEntropy, F32AgreesWithF64) {
  std::vector<double> logits64 = padded_logits(2);
  std::vector<float> logits32 = test::to_f32(logits64);
  std::vector<int32_t> tgt = targets();
  std::vector<double> losses64(kRows, NAN), dlogits64(logits64.size(), NAN);
  std::vector<float> losses32(kRows, NAN), dlogits32(logits32.size(), NAN);
  run(losses64, &dlogits64, logits64, tgt);
  run(losses32, &dlogits32, logits32, tgt);
  EXPECT_LT(test::max_rel_error(losses32, losses64), 1e-5);
  EXPECT_LT(test::max_rel_error(dlogits32, dlogits64), 1e-5);
}

// L = dloss * sum(losses), central differences with h = 1e-6 over every logit, padding included
// (where the loss does not depend on them: the difference is exactly 0). Observed 2.5e-7 relative
// (floor 1e-3); the tolerance is 1e-6.
TEST(CpuCrossEntropy, DlogitsMatchFiniteDifferences) {
  std::vector<double> logits = padded_logits(3);
  std::vector<int32_t> tgt = targets();
  std::vector<double> losses(kRows, NAN), dlogits(logits.size(), NAN);
  run(losses, &dlogits, logits, tgt);
  const std::vector<double> numeric = test::numeric_gradient(logits, [&] {
    std::vector<double> l(kRows);
    run(l, static_cast<std::vector<double>*>(nullptr), logits, tgt);
    double sum = 0.0;
    for (double x : l) sum += x;
    return kDloss * sum;
  });
  EXPECT_LT(test::max_rel_error(dlogits, numeric), 1e-6);
  for (int64_t r = 0; r < kRows; ++r) {
    for (int64_t j = 0; j < kPadded; ++j) {
      if (tgt[r] < 0 || j >= kVocab) EXPECT_EQ(dlogits[r * kPadded + j], 0.0) << "row " << r << " column " << j;
    }
  }
}

TEST(CpuCrossEntropy, DlogitsMayAliasLogits) {
  std::vector<float> logits = test::to_f32(padded_logits(4));
  std::vector<int32_t> tgt = targets();
  std::vector<float> losses(kRows, NAN), dlogits(logits.size(), NAN);
  run(losses, &dlogits, logits, tgt);
  std::vector<float> aliased_losses(kRows, NAN);
  run(aliased_losses, &logits, logits, tgt);
  EXPECT_EQ(aliased_losses, losses);
  EXPECT_EQ(logits, dlogits);
}

TEST(CpuCrossEntropy, RejectsTargetsOutsideTheVocabulary) {
  for (int32_t bad : {static_cast<int32_t>(kVocab), -2}) {
    std::vector<float> logits = test::to_f32(padded_logits(5));
    std::vector<int32_t> tgt = targets();
    tgt[2] = bad;
    std::vector<float> losses(kRows);
    try {
      run(losses, &logits, logits, tgt);
      ADD_FAILURE() << "target " << bad << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("target " + std::to_string(bad)), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace gpt
