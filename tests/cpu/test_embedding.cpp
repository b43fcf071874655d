// Token + position embedding with repeated token ids, with and without dropout: forward against the
// formula and f32 against f64; backward (accumulating into dwte, dwpe) against central finite differences
// in double (h = 1e-6, normwise relative tolerance 1e-6) and bitwise across thread counts.
#include "cpu/dropout.h"
#include "cpu/gradcheck.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>

namespace gpt {
namespace {

using test::cpu_backend;
using test::max_rel_error;
using test::random_vector;
using test::view;

constexpr int64_t kB = 3, kT = 6, kC = 70, kVocab = 7, kMaxT = 8;  // 18 tokens over 7 ids: repeats

struct EmbeddingData {
  std::vector<int32_t> tokens = test::random_tokens(kB * kT, kVocab, 1);
  std::vector<double> wte = random_vector(kVocab * kC, 2);
  std::vector<double> wpe = random_vector(kMaxT * kC, 3);
  std::vector<double> r = random_vector(kB * kT * kC, 4);
};

DropoutSpec dropout(float p) { return {p, RngStream{99, 2, 0, 0, RngSite::Embedding}}; }

template <class T>
std::vector<T> forward(std::vector<int32_t>& tokens, std::vector<T>& wte, std::vector<T>& wpe, const DropoutSpec& spec) {
  std::vector<T> out(kB * kT * kC, NAN);
  cpu_backend().embedding_forward(
      {view(out, {kB, kT, kC}), view(tokens, {kB, kT}), view(wte, {kVocab, kC}), view(wpe, {kMaxT, kC}), spec});
  return out;
}

class CpuEmbedding : public ::testing::TestWithParam<float> {};

TEST_P(CpuEmbedding, ForwardMatchesFormulaAndF32AgreesWithF64) {
  EmbeddingData d;
  const DropoutSpec spec = dropout(GetParam());
  const cpu::DropoutMask mask(spec);
  const std::vector<double> out = forward(d.tokens, d.wte, d.wpe, spec);
  for (int64_t row = 0; row < kB * kT; ++row) {
    for (int64_t c = 0; c < kC; ++c) {
      const int64_t i = row * kC + c;
      const double sum = d.wte[d.tokens[row] * kC + c] + d.wpe[(row % kT) * kC + c];
      ASSERT_EQ(out[i], mask.keep(static_cast<uint64_t>(i)) ? sum * mask.scale() : 0.0);
    }
  }
  std::vector<float> wte32 = test::to_f32(d.wte), wpe32 = test::to_f32(d.wpe);
  EXPECT_LT(max_rel_error(forward(d.tokens, wte32, wpe32, spec), out, 1.0), 1e-5);
}

TEST_P(CpuEmbedding, BackwardAccumulatesFiniteDifferenceGradients) {
  EmbeddingData d;
  const DropoutSpec spec = dropout(GetParam());
  const std::vector<double> dwte0 = random_vector(kVocab * kC, 5), dwpe0 = random_vector(kMaxT * kC, 6);
  std::vector<double> dwte = dwte0, dwpe = dwpe0;
  cpu_backend().embedding_backward(
      {view(dwte, {kVocab, kC}), view(dwpe, {kMaxT, kC}), view(d.r, {kB, kT, kC}), view(d.tokens, {kB, kT}), spec});
  for (size_t i = 0; i < dwte.size(); ++i) dwte[i] -= dwte0[i];
  for (size_t i = 0; i < dwpe.size(); ++i) dwpe[i] -= dwpe0[i];

  auto loss = [&] { return test::dot(forward(d.tokens, d.wte, d.wpe, spec), d.r); };
  EXPECT_LT(test::max_normwise_error(dwte, test::numeric_gradient(d.wte, loss)), 1e-6);
  EXPECT_LT(test::max_normwise_error(dwpe, test::numeric_gradient(d.wpe, loss)), 1e-6);
}

// Large enough (B*T*C above the parallel threshold) that the kernel runs its parallel region.
TEST_P(CpuEmbedding, BackwardIsThreadCountIndependent) {
  constexpr int64_t kBig = 16, kBigT = 8, kBigC = 200, kBigVocab = 11;
  std::vector<int32_t> tokens = test::random_tokens(kBig * kBigT, kBigVocab, 7);
  std::vector<float> dout = test::to_f32(random_vector(kBig * kBigT * kBigC, 8));
  auto run = [&](int threads) {
    const int saved = omp_get_max_threads();
    omp_set_num_threads(threads);
    std::vector<float> dwte(kBigVocab * kBigC, 0.5f), dwpe(kBigT * kBigC, 0.5f);
    cpu_backend().embedding_backward({view(dwte, {kBigVocab, kBigC}), view(dwpe, {kBigT, kBigC}),
                                      view(dout, {kBig, kBigT, kBigC}), view(tokens, {kBig, kBigT}), dropout(GetParam())});
    omp_set_num_threads(saved);
    dwte.insert(dwte.end(), dwpe.begin(), dwpe.end());
    return dwte;
  };
  EXPECT_EQ(run(1), run(3));
}

INSTANTIATE_TEST_SUITE_P(Dropout, CpuEmbedding, ::testing::Values(0.0f, 0.3f));

TEST(CpuEmbeddingChecks, RejectsTokensOutsideTheVocabulary) {
  EmbeddingData d;
  d.tokens[5] = kVocab;
  EXPECT_THROW(forward(d.tokens, d.wte, d.wpe, DropoutSpec{}), Error);
  d.tokens[5] = -1;
  EXPECT_THROW(forward(d.tokens, d.wte, d.wpe, DropoutSpec{}), Error);
}

}  // namespace
}  // namespace gpt
