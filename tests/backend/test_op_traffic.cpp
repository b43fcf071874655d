// op_traffic_bytes: each op's tensors counted once per read and once per write, from shapes and formats
// alone (the data pointers are never followed), with the parts of tables an op reads, the accumulated
// outputs read and written, and the fused ops without the tensor they keep to themselves. Every count is
// worked out by hand here from the rule in backend/op_traffic.h.
#include "backend/op_traffic.h"

#include <gtest/gtest.h>

namespace gpt {
namespace {

// A view of no memory: the counts never dereference, but an empty tensor counts as absent.
Tensor view(std::initializer_list<int64_t> dims, DType dtype = DType::F32) {
  static char anywhere;
  return Tensor(&anywhere, dims, dtype);
}

TEST(OpTraffic, ElementwiseOpsReadTheirInputsAndWriteTheirOutputsOnce) {
  EXPECT_EQ(op_traffic_bytes(FillArgs{view({3, 5}), 1.0f}), 60u);
  EXPECT_EQ(op_traffic_bytes(CopyArgs{view({7}, DType::BF16), view({7}, DType::BF16)}), 28u);
  EXPECT_EQ(op_traffic_bytes(GeluForwardArgs{view({4, 8}, DType::BF16), view({4, 8}, DType::BF16)}), 128u);
  EXPECT_EQ(op_traffic_bytes(GeluBackwardArgs{view({4, 8}), view({4, 8}), view({4, 8}, DType::BF16)}), 128u + 128u + 64u);
  EXPECT_EQ(op_traffic_bytes(ResidualForwardArgs{view({2, 6}), view({2, 6}), view({2, 6}, DType::E4M3), {}}), 48u + 48u + 12u);
  // A cast to FP8 with its running amax [1] and counts [2], each read and added to.
  CastArgs cast{view({10, 10}, DType::E4M3), view({10, 10})};
  cast.amax = view({1});
  cast.counts = view({2}, DType::I32);
  EXPECT_EQ(op_traffic_bytes(cast), 100u + 400u + 8u + 16u);
  EXPECT_EQ(op_traffic_bytes(AmaxArgs{view({1}), view({9}, DType::F16), false}), 4u + 18u);
  EXPECT_EQ(op_traffic_bytes(AmaxArgs{view({1}), view({9}, DType::F16), true}), 8u + 18u);
}

TEST(OpTraffic, AMatrixProductReadsItsOperandsAndReadsTheOutputOnlyWhenItAccumulates) {
  MatmulArgs m{view({16, 32}), view({16, 8}, DType::BF16), view({32, 8}, DType::BF16)};
  m.trans_b = true;
  EXPECT_EQ(op_traffic_bytes(m), 256u + 512u + 2048u);
  m.bias = view({32});
  EXPECT_EQ(op_traffic_bytes(m), 256u + 512u + 128u + 2048u);
  m.bias = {};
  m.beta = 1.0f;
  EXPECT_EQ(op_traffic_bytes(m), 256u + 512u + 2 * 2048u);
  m.staging = view({4096}, DType::U8);  // the product's working memory is not its traffic
  EXPECT_EQ(op_traffic_bytes(m), 256u + 512u + 2 * 2048u);
}

TEST(OpTraffic, TheFusedResidualLayerNormsCountTheSumOnceAndTheirGradientsAsAccumulated) {
  const int64_t N = 6, C = 16;
  LayerNormForwardArgs norm{view({N, C}, DType::BF16), view({N}), view({N}), view({N, C}, DType::BF16), view({C}), view({C})};
  EXPECT_EQ(op_traffic_bytes(norm), 192u + 24u + 24u + 192u + 64u + 64u);
  const ResidualForwardArgs residual{norm.in, view({N, C}, DType::BF16), view({N, C}, DType::BF16), {}};
  // The sum is written (192) and normalised where it is made: not read back.
  EXPECT_EQ(op_traffic_bytes(ResidualLayerNormForwardArgs{residual, norm}),
            3 * 192u + (192u + 24u + 24u + 64u + 64u));

  LayerNormBackwardArgs back{view({N, C}), view({C}), view({C}), view({N, C}), view({N, C}), view({C}), view({N}), view({N})};
  // din, dweight, dbias accumulate (read and written); dout, in, weight, mean, rstd are read.
  const uint64_t back_bytes = 2 * 384u + 2 * 64u + 2 * 64u + 384u + 384u + 64u + 24u + 24u;
  EXPECT_EQ(op_traffic_bytes(back), back_bytes);
  const ResidualBackwardArgs branch{view({N, C}), back.din, {}};
  EXPECT_EQ(op_traffic_bytes(branch), 2 * 384u);
  // The branch's gradient is written (384) from the stream's gradient as it is updated: not read again.
  EXPECT_EQ(op_traffic_bytes(LayerNormResidualBackwardArgs{back, branch}), back_bytes + 384u);
}

TEST(OpTraffic, AttentionCountsWhatEachPathKeeps) {
  const int64_t B = 2, T = 8, C = 16, NH = 2;
  const Tensor qkv = view({B, T, 3 * C}, DType::BF16), out = view({B, T, C}, DType::BF16);
  // Materialised: the [B,NH,T,T] probabilities are written; fused: the [B,NH,T] log-sum-exps.
  EXPECT_EQ(op_traffic_bytes(AttentionForwardArgs{out, view({B, NH, T, T}), qkv, 2, {}}), 512u + 1024u + 1536u);
  EXPECT_EQ(op_traffic_bytes(AttentionForwardArgs{out, view({B, NH, T}), qkv, 2, {}}), 512u + 128u + 1536u);
  // Backward: dqkv written, dprobs scratch written and read, dout, qkv and probs read, and the fused path's
  // forward output read (rowsum(dout * out)); a materialised backward is given no out.
  AttentionBackwardArgs back{view({B, T, 3 * C}, DType::BF16), view({B, NH, T}), out, qkv, view({B, NH, T}), 2, {}, out};
  EXPECT_EQ(op_traffic_bytes(back), 1536u + 2 * 128u + 512u + 1536u + 128u + 512u);
  back.out = {};
  back.dprobs = back.probs = view({B, NH, T, T});
  EXPECT_EQ(op_traffic_bytes(back), 1536u + 2 * 1024u + 512u + 1536u + 1024u);
}

TEST(OpTraffic, AKvCacheStepReadsTheRowsUpToItsPositionAndWritesOneMore) {
  const int64_t NH = 3, capacity = 10, hs = 4;
  AttentionDecodeArgs d{view({NH * hs}, DType::BF16), view({3 * NH * hs}, DType::BF16),
                        view({NH, capacity, hs}, DType::BF16), view({NH, capacity, hs}, DType::BF16),
                        view({NH, capacity}), 6, 0.5f};
  // out 24 + qkv 72; per head 6 key and 6 value rows read and one of each written (8 bytes a row); 6
  // scores per head written and read.
  EXPECT_EQ(op_traffic_bytes(d), 24u + 72u + 3u * 16u * 7u + 2u * 3u * 6u * 4u);
}

TEST(OpTraffic, TheEmbeddingTouchesOneTableRowPerTokenAndTheRowsOfTheBatchsPositions) {
  const Tensor tokens = view({2, 3}, DType::I32);
  const Tensor wte = view({50, 4}, DType::BF16), wpe = view({8, 4}, DType::BF16);
  // out 2*3*4 f32 = 96, tokens 24, six wte rows of 8 bytes, three wpe rows (positions 0..2).
  EXPECT_EQ(op_traffic_bytes(EmbeddingForwardArgs{view({2, 3, 4}), tokens, wte, wpe, {}}), 96u + 24u + 48u + 24u);
  // The gradients' rows are read and written: six of dwte (f32, 16 bytes), three of dwpe.
  EXPECT_EQ(op_traffic_bytes(EmbeddingBackwardArgs{view({50, 4}), view({8, 4}), view({2, 3, 4}), tokens, {}}),
            96u + 24u + 2 * 96u + 2 * 48u);
  // More tokens than the table has rows: at most every row, each read and written once.
  EXPECT_EQ(op_traffic_bytes(EmbeddingBackwardArgs{view({5, 4}), view({8, 4}), view({2, 3, 4}), tokens, {}}),
            96u + 24u + 2 * 80u + 2 * 48u);
}

TEST(OpTraffic, CrossEntropyAndTheOptimizer) {
  CrossEntropyArgs ce{view({6}), view({6, 24}, DType::BF16), view({6, 24}, DType::BF16), view({6}, DType::I32), 23, 0.1f};
  EXPECT_EQ(op_traffic_bytes(ce), 24u + 288u + 288u + 24u);
  ce.dlogits = {};
  EXPECT_EQ(op_traffic_bytes(ce), 24u + 288u + 24u);
  // Masters, moments: read and written; the gradient read.
  const AdamWArgs adam{view({100}), view({100}, DType::BF16), view({100}), view({100})};
  EXPECT_EQ(op_traffic_bytes(adam), 800u + 200u + 800u + 800u);
  EXPECT_EQ(op_traffic_bytes(SumOfSquaresArgs{view({1}), view({100}, DType::BF16)}), 4u + 200u);
  EXPECT_EQ(op_traffic_bytes(Fp8CurrentScaleArgs{view({100}, DType::BF16), nullptr}), 200u);
}

}  // namespace
}  // namespace gpt
