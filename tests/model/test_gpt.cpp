#include "model/gpt.h"

#include "cpu/gradcheck.h"
#include "model/model_test_util.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

namespace gpt::test {
namespace {

// The whole model in double precision against central finite differences, with dropout on (the masks
// are fixed by the step context) and some targets masked (-1), so the check covers every op's backward,
// the dropout replay in backward, and the loss normalisation by counted targets only.
TEST(GptGradient, WholeModelMatchesFiniteDifferencesInDouble) {
  ModelConfig m = tiny_model();
  m.dropout = 0.1;
  const GradientCheckBatch batch(m);
  GPT model(m, batch.B, batch.T, cpu_backend(), DType::F64);
  model.init_weights(3);
  // Larger weights than GPT-2's 0.02 so every path carries a gradient well above rounding noise.
  perturb(model.parameter_arena(), 100, 0.3);
  const std::vector<double> analytic = batch.gradients(model);

  // A spread of parameters from every tensor; wte's padding rows are never read.
  const Arena& params = model.parameter_arena();
  const FiniteDifferences fd = finite_differences(model, batch, analytic, 12, [&](size_t i, int64_t j) {
    return params.layout().buffer(i).name == "wte" && j / m.n_embd >= m.vocab_size;
  });
  ASSERT_GT(fd.numeric.size(), 150u);
  EXPECT_LT(max_normwise_error(fd.analytic, fd.numeric), 1e-7);
}

// The F32 model's gradients agree with the F64 model's (same init, same batch): the float path has
// no bug the double gradient check would miss.
TEST(GptGradient, Float32AgreesWithFloat64) {
  ModelConfig m = tiny_model(37, 2, 16, 4, 12);
  const int B = 3, T = 9;
  GPT m64(m, B, T, cpu_backend(), DType::F64), m32(m, B, T, cpu_backend(), DType::F32);
  m64.init_weights(9);
  m32.init_weights(9);
  std::vector<int32_t> tokens = random_tokens(B * T, m.vocab_size, 1), targets = random_tokens(B * T, m.vocab_size, 2);
  const StepContext ctx{1, 0, 0, true};
  for (GPT* model : {&m64, &m32}) {
    model->zero_grads();
    model->forward(tokens, targets, B, T, ctx, 1.0f / (B * T));
    model->backward(ctx);
  }
  std::vector<float> g32 = flat_f32(m32.gradient_arena());
  EXPECT_LT(max_normwise_error(g32, flat_f64(m64.gradient_arena())), 1e-5);
}

// K micro-batches of B accumulate to the gradient of one batch of K*B (dropout off). The sums run in
// a different order, so the float comparison has a tolerance; in double it is near machine precision.
template <class Flat>
void check_accumulation(DType dtype, double tolerance, Flat flat) {
  ModelConfig m = tiny_model(29, 2, 16, 2, 8);
  const int K = 4, B = 2, T = 8;
  GPT big(m, K * B, T, cpu_backend(), dtype), small(m, B, T, cpu_backend(), dtype);
  big.init_weights(4);
  small.init_weights(4);
  std::vector<int32_t> tokens = random_tokens(K * B * T, m.vocab_size, 11);
  std::vector<int32_t> targets = random_tokens(K * B * T, m.vocab_size, 12);
  for (size_t i = 0; i < targets.size(); i += 5) targets[i] = -1;  // masked targets, unevenly spread
  const float dloss = static_cast<float>(1.0 / static_cast<double>(count_targets(targets)));
  const StepContext ctx{1, 0, 0, true};

  big.zero_grads();
  big.forward(tokens, targets, K * B, T, ctx, dloss);
  const double big_loss = big.loss_sum();
  big.backward(ctx);

  small.zero_grads();
  double small_loss = 0.0;
  const size_t micro = static_cast<size_t>(B) * T;
  for (int k = 0; k < K; ++k) {
    std::vector<int32_t> tk(tokens.begin() + k * micro, tokens.begin() + (k + 1) * micro);
    std::vector<int32_t> tg(targets.begin() + k * micro, targets.begin() + (k + 1) * micro);
    StepContext mc = ctx;
    mc.micro_step = static_cast<uint32_t>(k);
    small.forward(tk, tg, B, T, mc, dloss);
    small_loss += small.loss_sum();
    small.backward(mc);
  }
  EXPECT_NEAR(small_loss, big_loss, tolerance * std::abs(big_loss));
  auto a = flat(small.gradient_arena());
  auto b = flat(big.gradient_arena());
  std::vector<double> b64(b.begin(), b.end());
  EXPECT_LT(max_normwise_error(a, b64), tolerance);
}

TEST(GptAccumulation, FourMicroBatchesEqualOneBigBatchFloat64) {
  check_accumulation(DType::F64, 1e-12, flat_f64);
}

TEST(GptAccumulation, FourMicroBatchesEqualOneBigBatchFloat32) {
  check_accumulation(DType::F32, 2e-6, flat_f32);
}

// Masked targets contribute nothing: their token losses are exactly 0 and the other tokens' losses are
// those of the unmasked batch.
TEST(GptLoss, MaskedTargetsContributeZero) {
  ModelConfig m = tiny_model();
  const int B = 2, T = 6;
  GPT model(m, B, T, cpu_backend(), DType::F64);
  model.init_weights(1);
  std::vector<int32_t> tokens = random_tokens(B * T, m.vocab_size, 1), targets = random_tokens(B * T, m.vocab_size, 2);
  const StepContext ctx{1, 0, 0, false};
  model.forward(tokens, targets, B, T, ctx);
  std::vector<double> full(static_cast<const double*>(model.activation_arena().tensor("losses").data),
                           static_cast<const double*>(model.activation_arena().tensor("losses").data) + B * T);
  std::vector<int32_t> masked = targets;
  masked[0] = masked[5] = masked[9] = -1;
  model.forward(tokens, masked, B, T, ctx);
  const double* losses = static_cast<const double*>(model.activation_arena().tensor("losses").data);
  double expected = 0.0;
  for (int i = 0; i < B * T; ++i) {
    if (masked[i] == -1) {
      EXPECT_EQ(losses[i], 0.0);
    } else {
      EXPECT_EQ(losses[i], full[i]);
      expected += full[i];
    }
  }
  EXPECT_DOUBLE_EQ(model.loss_sum(), expected);
  // At initialisation every token is near-uniform: the mean loss is close to log(V).
  EXPECT_NEAR(expected / 9.0, std::log(static_cast<double>(m.vocab_size)), 0.1);
}

TEST(GptInit, FollowsGpt2Initialisation) {
  ModelConfig m = tiny_model(200, 4, 64, 4, 16);
  GPT model(m, 1, 4, cpu_backend());
  model.init_weights(7);
  const ParameterTensors& p = model.params();
  auto stddev = [](const Tensor& t, int64_t n) {
    double s = 0, s2 = 0;
    for (int64_t i = 0; i < n; ++i) s += t.f32()[i], s2 += double(t.f32()[i]) * t.f32()[i];
    return std::sqrt(s2 / n - (s / n) * (s / n));
  };
  EXPECT_NEAR(stddev(p.qkvw, p.qkvw.numel()), 0.02, 0.001);
  EXPECT_NEAR(stddev(p.fcprojw, p.fcprojw.numel()), 0.02 / std::sqrt(8.0), 0.0005);
  EXPECT_EQ(p.ln1w.f32()[3], 1.0f);
  EXPECT_EQ(p.qkvb.f32()[5], 0.0f);
  // Padded vocabulary rows (200..255) stay zero.
  for (int64_t i = 200 * 64; i < p.wte.numel(); ++i) ASSERT_EQ(p.wte.f32()[i], 0.0f);
  // Same seed, same weights; another seed, other weights.
  GPT again(m, 1, 4, cpu_backend());
  again.init_weights(7);
  EXPECT_EQ(model.parameters_to_host(), again.parameters_to_host());
  again.init_weights(8);
  EXPECT_NE(model.parameters_to_host(), again.parameters_to_host());
}

}  // namespace
}  // namespace gpt::test
