// cuda/kernels/attention_decode.cu on the emulator, beyond the op table's comparison with the CPU:
//   - the split of a head's positions (attention_decode_chunks): every chunk holds at least one position,
//     together they cover the cache exactly, a short cache is one chunk, the count stays within
//     kMaxDecodeChunks and within what the scratch holds, for lengths 1 to 9000;
//   - the split result (several blocks a head, then the combine) is the same bits when called twice and
//     under every thread and block order (emu::set_schedule_seed), as the decoder's reproducibility
//     needs, each call from the same caches: the block that writes the new key and value rows must be
//     the one that reads them back;
//   - the split result equals the one-block result (a context without scratch) to FP32 rounding (1e-6 of
//     |out| + 1): the two are the same softmax summed in another order.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "cuda/kernels/kernel_test_util.h"
#include "kernels/attention_decode.h"

namespace gpt::cuda::test {
namespace {

TEST(AttentionDecodeChunks, CoverTheCacheWithNonEmptyChunksWithinTheScratch) {
  for (int64_t length = 1; length <= 9000; ++length) {
    for (const auto& [heads, hs, scratch] : {std::tuple<int64_t, int64_t, size_t>{12, 64, size_t{8} << 20},
                                             std::tuple<int64_t, int64_t, size_t>{64, 128, size_t{1} << 20},
                                             std::tuple<int64_t, int64_t, size_t>{3, 13, 0}}) {
      SCOPED_TRACE(testing::Message() << "length " << length << ", " << heads << " heads of " << hs);
      const DecodeChunks split = attention_decode_chunks(heads, hs, length, scratch);
      ASSERT_GE(split.chunks, 1);
      ASSERT_LE(split.chunks, kMaxDecodeChunks);
      ASSERT_GE(split.chunks * split.length, length) << "the chunks cover the cache";
      ASSERT_LT((split.chunks - 1) * split.length, length) << "the last chunk holds a position";
      if (split.chunks > 1)
        ASSERT_LE(static_cast<size_t>(split.chunks * heads * (hs + 2)) * sizeof(float), scratch) << "partials fit";
      if (length <= kDecodeChunkLength) ASSERT_EQ(split.chunks, 1);
      if (scratch == 0) ASSERT_EQ(split.chunks, 1);
    }
  }
  EXPECT_EQ(attention_decode_chunks(12, 64, 1024, size_t{8} << 20).chunks, 8);
  EXPECT_EQ(attention_decode_chunks(12, 64, 129, size_t{8} << 20).length, 65);
}

struct DecodeBuffers {
  static constexpr int64_t kHeads = 3, kHs = 64, kCapacity = 700, kC = kHeads * kHs;
  DeviceTensor qkv{{3 * kC}, DType::F32}, k_cache{{kHeads, kCapacity, kHs}, DType::F32},
      v_cache{{kHeads, kCapacity, kHs}, DType::F32}, scratch{{kHeads, kCapacity}, DType::F32}, out{{kC}, DType::F32};

  std::vector<float> keys, values;  // the caches before the call, restored before each

  explicit DecodeBuffers(uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
    const auto random = [&](const DeviceTensor& t) {
      std::vector<float> v(static_cast<size_t>(t.tensor().numel()));
      for (float& x : v) x = dist(rng);
      return v;
    };
    qkv.upload(random(qkv).data());
    keys = random(k_cache);
    values = random(v_cache);
  }
  // The output of a call on the caches as they were, so each call writes the new position's rows afresh
  // (a block that read row length-1 before another block wrote it would show).
  std::vector<float> run(int64_t length, const DeviceContext& ctx) {
    k_cache.upload(keys.data());
    v_cache.upload(values.data());
    attention_decode({out.tensor(), qkv.tensor(), k_cache.tensor(), v_cache.tensor(), scratch.tensor(), length,
                      1.0f / std::sqrt(static_cast<float>(kHs))},
                     ctx);
    std::vector<float> result(kC);
    const std::vector<unsigned char> bytes = out.download();
    std::memcpy(result.data(), bytes.data(), bytes.size());
    return result;
  }
};

TEST_F(EmuTest, AttentionDecodeSplitIsBitwiseReproducibleAndAgreesWithOneBlockAHead) {
  const KernelContext ctx;
  DeviceContext no_scratch = ctx.get();
  no_scratch.scratch = nullptr;
  no_scratch.scratch_bytes = 0;
  constexpr int64_t kLength = 651;  // six chunks of 109 (the last 106)
  ASSERT_EQ(attention_decode_chunks(DecodeBuffers::kHeads, DecodeBuffers::kHs, kLength, ctx.get().scratch_bytes).chunks, 6);
  DecodeBuffers b(5);
  const std::vector<float> split = b.run(kLength, ctx.get());
  EXPECT_EQ(b.run(kLength, ctx.get()), split) << "the same call twice";
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    emu::set_schedule_seed(seed);
    EXPECT_EQ(b.run(kLength, ctx.get()), split) << "schedule seed " << seed;
  }
  const std::vector<float> whole = b.run(kLength, no_scratch);
  double worst = 0.0;
  for (size_t i = 0; i < split.size(); ++i) {
    ASSERT_TRUE(std::isfinite(split[i])) << i;
    // Relative to |out| + the values' scale (U(-2, 2): rms 1.15), as the op table measures: an output
    // element is a weighted mean of 651 values, often near zero.
    worst = std::max(worst, std::abs(static_cast<double>(split[i]) - whole[i]) / (1.0 + std::abs(whole[i])));
  }
  EXPECT_LE(worst, 1e-6);
  EXPECT_NE(split, whole) << "the split path did not run: one-block and split results are the same bits";
  std::printf("split (6 chunks) against one block a head, length %lld: %.3g relative\n", static_cast<long long>(kLength),
              worst);
}

}  // namespace
}  // namespace gpt::cuda::test
