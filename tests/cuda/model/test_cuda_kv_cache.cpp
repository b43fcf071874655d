// The KV-cache decoder on the CUDA backend (on the emulator in CI), under every recipe: its one-row products
// of mixed formats run on cuda/gemm/row_product.cu where cuBLASLt refuses them, and its attention on
// cuda/kernels/attention_decode.cu, so this is where those kernels meet the model. For each recipe, from the same random weights on both backends:
//   - every position's cached logits on CUDA against CUDA's own full forward, within the CPU decoder test's
//     per-recipe bounds (tests/model/test_kv_cache_decoder.cpp says where each comes from);
//   - greedy decoding with the cache equal, token for token, to the uncached sampler on CUDA;
//   - CUDA's cached logits against the CPU decoder's, position by position: FP32 within 1e-5 (1 + |logit|)
//     and greedy tokens equal; the narrow recipes within the bound of their own format below, since the two
//     backends sum their products in different orders and a narrow value can round either way.
// And a LoRA model (rank 4 on every target, random adapters) in fp32 and bf16, the same three ways: the
// decoder adds each adapter's one-row products after the base product's, as the forward does. And a
// 200-position context in fp32 and bf16, past the length where the attention kernel splits a head's cache
// over several blocks and combines them (kernels/attention_decode.h: from 129 positions on).
// The worst differences are printed for the closing notes.
#include "backend/cuda_entry.h"
#include "model/kv_cache_decoder.h"
#include "train/sampler.h"

#include "cpu/gradcheck.h"
#include "cuda/model/skip_without_cuda.h"
#include "model/kv_cache_test_util.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace gpt::test {
namespace {

Backend* cuda_backend() {
  static std::unique_ptr<Backend> cuda = cuda::device_count() > 0 ? cuda::make_backend() : nullptr;
  return cuda.get();
}

struct RecipeCase {
  const char* name;
  PrecisionRecipe recipe;
  double against_full;  // |cached - full| / (1 + |full|) on CUDA, the CPU decoder test's bound
  double against_cpu;   // |cuda - cpu| / (1 + |cpu|), the cached logits of the two backends
};

// The smallest shapes cuBLASLt's FP8 products take in the full forward (C 32, B*T 16: multiples of 16),
// an odd vocabulary (23 padded to 24) and two blocks.
ModelConfig decoder_model() { return tiny_model(23, 2, 32, 2, 16); }

const std::vector<int> kPrompt{3, 1, 4};
const SampleOptions kGreedy{9, 1.0, 1, 1.0};

// What each case checks: gpu's cached logits against its full forward and against cpu's cache (printed),
// and greedy decoding on gpu with the cache against the uncached sampler; returns the tokens drawn.
std::vector<int> check_decoding(const RecipeCase& c, GPT& gpu, GPT& cpu, const std::vector<int32_t>& tokens) {
  const std::vector<std::vector<float>> full = full_forward_logits(gpu, tokens);
  const std::vector<std::vector<float>> cached = cached_logits(gpu, tokens);
  const double against_full = worst_relative(cached, full);
  EXPECT_LE(against_full, c.against_full);
  const double against_cpu = worst_relative(cached, cached_logits(cpu, tokens));
  EXPECT_LE(against_cpu, c.against_cpu);
  std::printf("%s: cached against CUDA's full forward %.3g (bound %.3g), against the CPU's cache %.3g (bound %.3g)\n",
              c.name, against_full, c.against_full, against_cpu, c.against_cpu);
  HostRng a(11, 0), b(11, 0);
  const std::vector<int> drawn = generate_cached(gpu, kPrompt, kGreedy, a);
  EXPECT_EQ(drawn, generate(gpu, kPrompt, kGreedy, b));
  return drawn;
}

TEST(CudaKvCache, EveryRecipeDecodesOnCudaAsTheFullForwardAndTheCpuDo) {
  SKIP_WITHOUT_CUDA();
  const ModelConfig m = decoder_model();
  const std::vector<int32_t> tokens = random_window(m, 9);
  for (const RecipeCase& c : {RecipeCase{"fp32", PrecisionRecipe{}, 2e-5, 1e-5},
                              RecipeCase{"bf16", recipe_of(RecipeKind::Bf16), 4e-2, 4e-2},
                              RecipeCase{"fp16", recipe_of(RecipeKind::Fp16), 5e-3, 5e-3},
                              RecipeCase{"fp8 delayed", recipe_of(RecipeKind::Fp8), 1e-1, 1e-1},
                              RecipeCase{"fp8 current", recipe_of(RecipeKind::Fp8, Fp8ScalingMode::Current), 2e-1,
                                         2e-1}}) {
    SCOPED_TRACE(c.name);
    GPT gpu(m, 1, m.context_length, *cuda_backend(), DType::F32, {}, c.recipe);
    GPT cpu(m, 1, m.context_length, cpu_backend(), DType::F32, {}, c.recipe);
    randomise(gpu, 8);
    randomise(cpu, 8);
    ASSERT_TRUE(KvCacheDecoder::supports(gpu));
    const std::vector<int> drawn = check_decoding(c, gpu, cpu, tokens);
    if (c.recipe.recipe == RecipeKind::Fp32) {
      HostRng on_cpu(11, 0);
      EXPECT_EQ(drawn, generate_cached(cpu, kPrompt, kGreedy, on_cpu));
    }
  }
}

TEST(CudaKvCache, LoraModelsDecodeOnCudaWithTheirAdapters) {
  SKIP_WITHOUT_CUDA();
  const ModelConfig m = decoder_model();
  const std::vector<int32_t> tokens = random_window(m, 10);
  LoraSpec lora;
  lora.rank = 4;
  lora.alpha = 8.0;
  lora.targets = {true, true, true, true};
  for (const RecipeCase& c : {RecipeCase{"LoRA fp32", PrecisionRecipe{}, 2e-5, 1e-5},
                              RecipeCase{"LoRA bf16", recipe_of(RecipeKind::Bf16), 4e-2, 4e-2}}) {
    SCOPED_TRACE(c.name);
    GPT gpu(m, 1, m.context_length, *cuda_backend(), DType::F32, {}, c.recipe, lora);
    GPT cpu(m, 1, m.context_length, cpu_backend(), DType::F32, {}, c.recipe, lora);
    randomise(gpu, 14);
    randomise(cpu, 14);
    ASSERT_TRUE(KvCacheDecoder::supports(gpu));
    check_decoding(c, gpu, cpu, tokens);
  }
}

TEST(CudaKvCache, LongCachesSplitOverBlocksDecodeAsTheFullForwardAndTheCpuDo) {
  SKIP_WITHOUT_CUDA();
  const ModelConfig m = tiny_model(23, 1, 32, 2, 200);
  const std::vector<int32_t> tokens = random_window(m, 12);
  for (const RecipeCase& c : {RecipeCase{"fp32, 200 positions", PrecisionRecipe{}, 2e-5, 1e-5},
                              RecipeCase{"bf16, 200 positions", recipe_of(RecipeKind::Bf16), 4e-2, 4e-2}}) {
    SCOPED_TRACE(c.name);
    GPT gpu(m, 1, m.context_length, *cuda_backend(), DType::F32, {}, c.recipe);
    GPT cpu(m, 1, m.context_length, cpu_backend(), DType::F32, {}, c.recipe);
    randomise(gpu, 15);
    randomise(cpu, 15);
    check_decoding(c, gpu, cpu, tokens);
  }
}

}  // namespace
}  // namespace gpt::test
