// The bench's FLOP accounting against hand counts: GPT-2's parameter count (tiny and 124M), the 6N +
// 12 L T C model FLOPs per token, and the GEMM shapes the peak is measured at.
#include "bench/flops.h"
#include "bench/gemm_peak.h"
#include "layout/parameter_layout.h"
#include "test_util.h"

#include <gtest/gtest.h>

namespace gpt {
namespace {

// L1 C8 NH2, vocabulary 11 padded to 16, 8 positions: every tensor counted by hand.
ModelConfig tiny() { return test::tiny_model(11, 1, 8, 2, 8); }

TEST(BenchFlops, ParameterCountMatchesAHandCountAndTheLayout) {
  const int64_t wte = 16 * 8, wpe = 8 * 8, ln = 2 * 8, qkv = 24 * 8 + 24, proj = 8 * 8 + 8, fc = 32 * 8 + 32,
                fcproj = 8 * 32 + 8;
  const int64_t hand = wte + wpe + ln + qkv + proj + ln + fc + fcproj + ln;
  ASSERT_EQ(hand, 1080);
  EXPECT_EQ(bench::gpt2_parameter_count(tiny()), hand);
  EXPECT_EQ(ParameterLayout(tiny(), DType::F32).num_parameters(), hand);
  const ModelConfig other = test::tiny_model(37, 3, 16, 4, 12);
  EXPECT_EQ(bench::gpt2_parameter_count(other), ParameterLayout(other, DType::F32).num_parameters());
}

TEST(BenchFlops, Gpt2SmallHasLlmcsParameterCount) {
  ModelConfig m;
  m.vocab_size = 50257;
  m.vocab_pad_multiple = 128;
  m.context_length = 1024;
  m.n_layer = 12;
  m.n_head = 12;
  m.n_embd = 768;
  EXPECT_EQ(bench::gpt2_parameter_count(m), 124475904);  // llm.c's count, padded vocabulary 50304
  const bench::ModelFlops f = bench::model_flops(m, 64);
  EXPECT_EQ(f.position_embedding, 1024 * 768);
  EXPECT_EQ(f.counted_parameters, 124475904 - 1024 * 768);
  EXPECT_DOUBLE_EQ(f.attention_per_token, 12.0 * 12 * 64 * 768);
}

TEST(BenchFlops, SixNPlusAttentionPerToken) {
  const bench::ModelFlops f = bench::model_flops(tiny(), 8);
  EXPECT_EQ(f.parameters, 1080);
  EXPECT_EQ(f.position_embedding, 64);
  EXPECT_EQ(f.counted_parameters, 1016);
  EXPECT_DOUBLE_EQ(f.dense_per_token, 6.0 * 1016);
  EXPECT_DOUBLE_EQ(f.attention_per_token, 12.0 * 1 * 8 * 8);  // 12 L T C
  EXPECT_DOUBLE_EQ(f.per_token(), 6096.0 + 768.0);
  EXPECT_DOUBLE_EQ(bench::model_flops(tiny(), 4).attention_per_token, 12.0 * 4 * 8);
}

// LoRA: the frozen weights cost 4N (forward and input gradient), the adapters 6 N_a; rank 2 on qkv
// (8 -> 24) and fc (8 -> 32) of the one block: N_a = 2 x (8 + 24) + 2 x (8 + 32) = 144.
TEST(BenchFlops, LoraCountsFourNForTheFrozenWeightsAndSixForTheAdapters) {
  LoraSpec lora;
  lora.rank = 2;
  lora.targets = {true, false, true, false};
  const bench::ModelFlops f = bench::model_flops(tiny(), 8, lora);
  EXPECT_EQ(f.counted_parameters, 1016);
  EXPECT_EQ(f.adapter_parameters, 144);
  EXPECT_DOUBLE_EQ(f.dense_per_token, 4.0 * 1016 + 6.0 * 144);
  EXPECT_DOUBLE_EQ(f.attention_per_token, 12.0 * 1 * 8 * 8);
  EXPECT_EQ(bench::model_flops(tiny(), 8).adapter_parameters, 0);
}

// Per micro-batch of BT rows each weight matrix W [OC, IC] costs 2 BT OC IC FLOPs forward and twice that
// backward, so the listed GEMMs add up to 6 BT times the matrix parameters (the LM head included, once).
TEST(BenchFlops, GemmShapesAddUpToSixTimesTheMatrixParameters) {
  const int B = 2, T = 8, K = 3;
  const std::vector<bench::GemmShape> shapes = bench::model_gemm_shapes(tiny(), B, T, K);
  ASSERT_EQ(shapes.size(), 15u);  // 5 matrices x (forward, dx, dW), no two alike at this size
  double flops = 0.0;
  for (const bench::GemmShape& s : shapes) flops += s.flops() * static_cast<double>(s.per_step);
  const double matrix_params = 24 * 8 + 8 * 8 + 32 * 8 + 8 * 32 + 16 * 8;
  EXPECT_DOUBLE_EQ(flops, 6.0 * B * T * K * matrix_params);

  const bench::GemmShape& qkv = shapes[0];
  EXPECT_EQ(qkv.name, "qkv forward");
  EXPECT_EQ(qkv.m, B * T);
  EXPECT_EQ(qkv.n, 24);
  EXPECT_EQ(qkv.k, 8);
  EXPECT_TRUE(qkv.trans_b);
  EXPECT_EQ(qkv.per_step, K);
  const bench::GemmShape& head_dw = shapes.back();
  EXPECT_EQ(head_dw.name, "lm head backward dW");
  EXPECT_EQ(head_dw.m, 16);
  EXPECT_EQ(head_dw.n, 8);
  EXPECT_EQ(head_dw.k, B * T);
  EXPECT_TRUE(head_dw.trans_a);
  EXPECT_EQ(head_dw.beta, 1.0f);
  EXPECT_EQ(head_dw.per_step, K);
}

TEST(BenchFlops, CoincidingShapesAreMergedWithTheirCounts) {
  // C = 8 and Vp = 32 = 4C: the LM head's GEMMs are the fc layer's.
  ModelConfig m = test::tiny_model(32, 2, 8, 2, 8);
  const std::vector<bench::GemmShape> shapes = bench::model_gemm_shapes(m, 1, 4, 1);
  ASSERT_EQ(shapes.size(), 12u);
  EXPECT_EQ(shapes[6].name, "fc forward + lm head forward");
  EXPECT_EQ(shapes[6].per_step, 2 + 1);
}

}  // namespace
}  // namespace gpt
