// Attention forward against explicit loops, backward against central finite differences in double
// precision (with and without dropout), F32/F64 agreement, causality and the dropout mask.
#include "cpu/gradcheck.h"

#include <gtest/gtest.h>

#include <cmath>

namespace gpt {
namespace {

using test::cpu_backend;
using test::view;

struct Shape {
  int64_t B, T, C, NH;
  int64_t hs() const { return C / NH; }
  size_t qkv_size() const { return static_cast<size_t>(B * T * 3 * C); }
  size_t out_size() const { return static_cast<size_t>(B * T * C); }
  size_t probs_size() const { return static_cast<size_t>(B * NH * T * T); }
};

DropoutSpec dropout(float p) {
  DropoutSpec spec;
  spec.p = p;
  spec.stream = RngStream{1234, 5, 1, 3, RngSite::AttentionProbs};
  return spec;
}

template <class T>
struct Forward {
  std::vector<T> out, probs;
};

template <class T>
Forward<T> attention_forward(const Shape& s, std::vector<T>& qkv, const DropoutSpec& drop) {
  Forward<T> f{std::vector<T>(s.out_size(), T(NAN)), std::vector<T>(s.probs_size(), T(NAN))};
  AttentionForwardArgs args;
  args.out = view(f.out, {s.B, s.T, s.C});
  args.probs = view(f.probs, {s.B, s.NH, s.T, s.T});
  args.qkv = view(qkv, {s.B, s.T, 3 * s.C});
  args.n_head = static_cast<int>(s.NH);
  args.dropout = drop;
  cpu_backend().attention_forward(args);
  return f;
}

std::vector<double> attention_backward(const Shape& s, std::vector<double>& qkv, std::vector<double>& dout,
                                       const DropoutSpec& drop) {
  Forward<double> f = attention_forward(s, qkv, drop);
  std::vector<double> dqkv(s.qkv_size(), NAN), dprobs(s.probs_size(), NAN);
  AttentionBackwardArgs args;
  args.dqkv = view(dqkv, {s.B, s.T, 3 * s.C});
  args.dprobs = view(dprobs, {s.B, s.NH, s.T, s.T});
  args.dout = view(dout, {s.B, s.T, s.C});
  args.qkv = view(qkv, {s.B, s.T, 3 * s.C});
  args.probs = view(f.probs, {s.B, s.NH, s.T, s.T});
  args.n_head = static_cast<int>(s.NH);
  args.dropout = drop;
  cpu_backend().attention_backward(args);
  return dqkv;
}

// Explicit loops straight from the definition, with the mask rule spelled out from the stream.
Forward<double> naive_attention(const Shape& s, const std::vector<double>& qkv, const DropoutSpec& drop) {
  Forward<double> f{std::vector<double>(s.out_size(), 0.0), std::vector<double>(s.probs_size(), 0.0)};
  const int64_t C = s.C, hs = s.hs(), T = s.T;
  const uint32_t threshold = dropout_threshold(drop.p);
  for (int64_t b = 0; b < s.B; ++b) {
    for (int64_t h = 0; h < s.NH; ++h) {
      for (int64_t t = 0; t < T; ++t) {
        const double* q = &qkv[(b * T + t) * 3 * C + h * hs];
        std::vector<double> scores(t + 1);
        double max_score = -INFINITY;
        for (int64_t t2 = 0; t2 <= t; ++t2) {
          const double* k = &qkv[(b * T + t2) * 3 * C + C + h * hs];
          double dot = 0.0;
          for (int64_t i = 0; i < hs; ++i) dot += q[i] * k[i];
          scores[t2] = dot / std::sqrt(static_cast<double>(hs));
          max_score = std::max(max_score, scores[t2]);
        }
        double sum = 0.0;
        for (int64_t t2 = 0; t2 <= t; ++t2) sum += std::exp(scores[t2] - max_score);
        for (int64_t t2 = 0; t2 <= t; ++t2) {
          const size_t index = static_cast<size_t>(((b * s.NH + h) * T + t) * T + t2);
          const double p = std::exp(scores[t2] - max_score) / sum;
          f.probs[index] = p;
          const bool keep = !drop.active() || drop.stream.word(index) >= threshold;
          const double pd = keep ? p / (1.0 - drop.p) : 0.0;
          const double* v = &qkv[(b * T + t2) * 3 * C + 2 * C + h * hs];
          for (int64_t i = 0; i < hs; ++i) f.out[(b * T + t) * C + h * hs + i] += pd * v[i];
        }
      }
    }
  }
  return f;
}

// T = 70 spans two row blocks of the blocked kernel; T = 5 and C = 12 are multiples of nothing.
const Shape kSmall{2, 5, 12, 3};
const Shape kTwoBlocks{1, 70, 8, 2};

TEST(CpuAttention, ForwardMatchesNaiveLoops) {
  for (const Shape& s : {kSmall, kTwoBlocks, Shape{2, 131, 40, 5}}) {
    for (float p : {0.0f, 0.2f}) {
      std::vector<double> qkv = test::random_vector(s.qkv_size(), 11);
      const Forward<double> got = attention_forward(s, qkv, dropout(p));
      const Forward<double> want = naive_attention(s, qkv, dropout(p));
      EXPECT_LT(test::max_rel_error(got.out, want.out), 1e-12) << "T=" << s.T << " p=" << p;
      // The whole buffer, upper triangle included, which must be exactly 0.
      EXPECT_LT(test::max_rel_error(got.probs, want.probs), 1e-12) << "T=" << s.T << " p=" << p;
      for (int64_t bh = 0; bh < s.B * s.NH; ++bh)
        for (int64_t t = 0; t < s.T; ++t)
          for (int64_t t2 = t + 1; t2 < s.T; ++t2) ASSERT_EQ(got.probs[(bh * s.T + t) * s.T + t2], 0.0);
    }
  }
}

TEST(CpuAttention, F32AgreesWithF64) {
  const Shape s{2, 67, 48, 4};
  for (float p : {0.0f, 0.2f}) {
    std::vector<double> qkv64 = test::random_vector(s.qkv_size(), 12);
    std::vector<float> qkv32 = test::to_f32(qkv64);
    const Forward<double> f64 = attention_forward(s, qkv64, dropout(p));
    const Forward<float> f32 = attention_forward(s, qkv32, dropout(p));
    // out entries are signed averages of N(0,1) values and can cancel to near 0, so the error is taken
    // relative to the scale of the terms (floor 0.1) rather than the sum.
    EXPECT_LT(test::max_rel_error(f32.out, f64.out, 0.1), 1e-5) << "p=" << p;
    EXPECT_LT(test::max_rel_error(f32.probs, f64.probs), 1e-5) << "p=" << p;
  }
}

// L = sum(out * R); dqkv from the backward against central differences. h = 1e-5 rather than 1e-6:
// L sums hundreds of O(1) terms, so its rounding (~1e-14) over 2h gives ~1e-8 absolute noise at
// h = 1e-6, i.e. 1e-5 relative at the 1e-3 floor, while the h^2 truncation term is still ~1e-10 at
// h = 1e-5. Observed errors are ~2e-7; the tolerance is 1e-6 relative (floor 1e-3).
void check_gradient(const Shape& s, float p) {
  std::vector<double> qkv = test::random_vector(s.qkv_size(), 21);
  std::vector<double> r = test::random_vector(s.out_size(), 22);
  const DropoutSpec drop = dropout(p);
  const std::vector<double> analytic = attention_backward(s, qkv, r, drop);
  const auto loss = [&] { return test::dot(attention_forward(s, qkv, drop).out, r); };
  const std::vector<double> numeric = test::numeric_gradient(qkv, loss, 1e-5);
  EXPECT_LT(test::max_rel_error(analytic, numeric), 1e-6) << "T=" << s.T << " p=" << p;
}

TEST(CpuAttention, BackwardMatchesFiniteDifferences) {
  check_gradient(kSmall, 0.0f);
  check_gradient(kTwoBlocks, 0.0f);
}

TEST(CpuAttention, BackwardWithDropoutMatchesFiniteDifferences) {
  check_gradient(kSmall, 0.2f);
  check_gradient(kTwoBlocks, 0.2f);
}

TEST(CpuAttention, BackwardOverwritesDqkvAndIsRepeatable) {
  const Shape s{2, 70, 24, 3};
  std::vector<double> qkv = test::random_vector(s.qkv_size(), 31);
  std::vector<double> dout = test::random_vector(s.out_size(), 32);
  const std::vector<double> first = attention_backward(s, qkv, dout, dropout(0.1f));
  const std::vector<double> second = attention_backward(s, qkv, dout, dropout(0.1f));
  EXPECT_EQ(first, second);  // NaN-poisoned dqkv each time: nothing is read from it
}

// Changing q, k, v of tokens after t leaves out[.., <= t, ..] bit for bit unchanged.
TEST(CpuAttention, IsCausal) {
  const Shape s{2, 70, 12, 3};
  const std::vector<double> base = test::random_vector(s.qkv_size(), 41);
  for (int64_t t : {0, 4, 63, 64, 68}) {
    std::vector<double> a = base, b = base;
    const std::vector<double> noise = test::random_vector(s.qkv_size(), 42);
    for (int64_t bb = 0; bb < s.B; ++bb)
      for (int64_t t2 = t + 1; t2 < s.T; ++t2)
        for (int64_t c = 0; c < 3 * s.C; ++c) b[(bb * s.T + t2) * 3 * s.C + c] += noise[(bb * s.T + t2) * 3 * s.C + c];
    const Forward<double> fa = attention_forward(s, a, dropout(0.2f));
    const Forward<double> fb = attention_forward(s, b, dropout(0.2f));
    for (int64_t bb = 0; bb < s.B; ++bb) {
      for (int64_t t2 = 0; t2 < s.T; ++t2) {
        const int64_t row = (bb * s.T + t2) * s.C;
        bool differs = false;
        for (int64_t c = 0; c < s.C; ++c) differs |= fa.out[row + c] != fb.out[row + c];
        EXPECT_EQ(differs, t2 > t) << "b=" << bb << " position " << t2 << " after changing tokens > " << t;
      }
    }
  }
}

// With v of head h at token t2 set to the one-hot e_t2 (hs = T), out[t, h*hs + t2] is the dropped
// probability itself: 0 where the mask drops, probs / (1 - p) where it keeps.
TEST(CpuAttention, DropoutZeroesTheRightFractionOfProbabilities) {
  const Shape s{4, 48, 4 * 48, 4};
  const float p = 0.2f;
  std::vector<double> qkv = test::random_vector(s.qkv_size(), 51);
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t t = 0; t < s.T; ++t)
      for (int64_t c = 0; c < s.C; ++c) qkv[(b * s.T + t) * 3 * s.C + 2 * s.C + c] = (c % s.hs() == t) ? 1.0 : 0.0;
  const Forward<double> f = attention_forward(s, qkv, dropout(p));
  const uint32_t threshold = dropout_threshold(p);
  const RngStream stream = dropout(p).stream;
  int64_t dropped = 0, causal = 0;
  for (int64_t b = 0; b < s.B; ++b) {
    for (int64_t h = 0; h < s.NH; ++h) {
      for (int64_t t = 0; t < s.T; ++t) {
        for (int64_t t2 = 0; t2 <= t; ++t2) {
          const size_t index = static_cast<size_t>(((b * s.NH + h) * s.T + t) * s.T + t2);
          const double got = f.out[(b * s.T + t) * s.C + h * s.hs() + t2];
          const bool kept = stream.word(index) >= threshold;
          ASSERT_NEAR(got, kept ? f.probs[index] / (1.0 - p) : 0.0, 1e-14);
          dropped += got == 0.0;
          ++causal;
        }
      }
    }
  }
  EXPECT_NEAR(static_cast<double>(dropped) / causal, p, 0.015) << dropped << " of " << causal;
}

TEST(CpuAttention, RejectsBadShapes) {
  const Shape s = kSmall;
  std::vector<double> qkv(s.qkv_size(), 0.0), out(s.out_size()), probs(s.probs_size());
  AttentionForwardArgs args;
  args.out = view(out, {s.B, s.T, s.C});
  args.probs = view(probs, {s.B, s.NH, s.T, s.T});
  args.qkv = view(qkv, {s.B, s.T, 3 * s.C});
  args.n_head = 5;
  EXPECT_THROW(cpu_backend().attention_forward(args), Error);
}

}  // namespace
}  // namespace gpt
