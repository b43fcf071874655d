// embedding_backward (cuda/kernels/embedding.cu) on the emulator: its token buckets are filled with
// integer atomics in whatever order the threads run, then put in position order before any float is
// added, so dwte and dwpe come out bitwise the same under every thread order (swept by schedule seed),
// with dropout on; and they agree with sums over the positions in double precision.
#include <gtest/gtest.h>

#include <cmath>

#include "core/philox.h"
#include "cuda/kernels/row_kernel_test_util.h"
#include "emu/control.h"
#include "kernels/embedding.h"

namespace gpt::cuda::test {
namespace {

constexpr int64_t kB = 4, kT = 33, kC = 40, kVocab = 3, kMaxT = 36;

DropoutSpec dropout() {
  DropoutSpec d;
  d.p = 0.25f;
  d.stream.seed = 99;
  d.stream.step = 5;
  d.stream.site = RngSite::Embedding;
  return d;
}

std::vector<int32_t> tokens() {
  std::vector<int32_t> t(kB * kT);
  for (size_t i = 0; i < t.size(); ++i) t[i] = static_cast<int32_t>((i * 7 + i / 5) % kVocab);
  return t;
}

struct Grads {
  std::vector<float> dwte, dwpe;
};

Grads run_backward(const TestContext& tc) {
  DeviceArray<int32_t> d_tokens(tokens());
  DeviceArray<float> d_dout(uniform(kB * kT * kC, 1)), d_dwte(uniform(kVocab * kC, 2)), d_dwpe(uniform(kMaxT * kC, 3));
  EmbeddingBackwardArgs a;
  a.dwte = device_tensor(d_dwte, {kVocab, kC});
  a.dwpe = device_tensor(d_dwpe, {kMaxT, kC});
  a.dout = device_tensor(d_dout, {kB, kT, kC});
  a.tokens = device_tensor(d_tokens, {kB, kT});
  a.dropout = dropout();
  embedding_backward(a, tc.ctx);
  return {d_dwte.download(), d_dwpe.download()};
}

class EmbeddingBackward : public EmuTest {};

TEST_F(EmbeddingBackward, IsBitwiseReproducibleUnderEveryThreadOrder) {
  const TestContext tc(4);
  emu::set_schedule_seed(0);
  const Grads first = run_backward(tc);
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    emu::set_schedule_seed(seed);
    const Grads again = run_backward(tc);
    EXPECT_EQ(again.dwte, first.dwte) << "seed " << seed;
    EXPECT_EQ(again.dwpe, first.dwpe) << "seed " << seed;
  }
}

TEST_F(EmbeddingBackward, MatchesDoubleSumsOverThePositions) {
  const TestContext tc(4);
  const Grads got = run_backward(tc);
  const auto tok = tokens();
  const auto dout = uniform(kB * kT * kC, 1);
  std::vector<double> dwte(kVocab * kC), dwpe(kMaxT * kC);
  const auto dwte0 = uniform(kVocab * kC, 2), dwpe0 = uniform(kMaxT * kC, 3);
  for (size_t i = 0; i < dwte.size(); ++i) dwte[i] = dwte0[i];
  for (size_t i = 0; i < dwpe.size(); ++i) dwpe[i] = dwpe0[i];
  const DropoutSpec d = dropout();
  const uint32_t threshold = dropout_threshold(d.p);
  int dropped = 0;
  for (int64_t pos = 0; pos < kB * kT; ++pos) {
    for (int64_t c = 0; c < kC; ++c) {
      const uint64_t i = static_cast<uint64_t>(pos * kC + c);
      if (d.stream.word(i) < threshold) {
        ++dropped;
        continue;
      }
      const double g = dout[i] / (1.0 - d.p);
      dwte[tok[pos] * kC + c] += g;
      dwpe[(pos % kT) * kC + c] += g;
    }
  }
  EXPECT_GT(dropped, 0);
  for (size_t i = 0; i < dwte.size(); ++i) EXPECT_NEAR(got.dwte[i], dwte[i], 1e-4) << "dwte " << i;
  for (size_t i = 0; i < dwpe.size(); ++i) EXPECT_NEAR(got.dwpe[i], dwpe[i], 1e-5) << "dwpe " << i;
}

}  // namespace
}  // namespace gpt::cuda::test
