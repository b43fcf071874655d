// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11): a counter-based
// generator. Output is a pure function of (key, counter), so a dropout mask is regenerated bit for bit
// from its coordinates (seed, step, micro-step, layer, site, element) instead of being stored, on any
// backend and in any order. The same header compiles for the host and for CUDA.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define GPT_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define GPT_HOST_DEVICE inline
#endif

namespace gpt {

struct Philox4 {
  uint32_t v[4];
};

GPT_HOST_DEVICE void philox_mulhilo(uint32_t a, uint32_t b, uint32_t& hi, uint32_t& lo) {
  const uint64_t p = static_cast<uint64_t>(a) * b;
  hi = static_cast<uint32_t>(p >> 32);
  lo = static_cast<uint32_t>(p);
}

GPT_HOST_DEVICE Philox4 philox4x32_10(Philox4 ctr, uint32_t key0, uint32_t key1) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    uint32_t hi0, lo0, hi1, lo1;
    philox_mulhilo(kM0, ctr.v[0], hi0, lo0);
    philox_mulhilo(kM1, ctr.v[2], hi1, lo1);
    ctr = Philox4{{hi1 ^ ctr.v[1] ^ key0, lo1, hi0 ^ ctr.v[3] ^ key1, lo0}};
    key0 += kW0;
    key1 += kW1;
  }
  return ctr;
}

// Where a random stream is used: one stream per (step, micro-step, layer, site), so masks of
// different tensors never share random numbers.
enum class RngSite : uint32_t { AttentionProbs = 1, AttentionResidual = 2, MlpResidual = 3, Embedding = 4 };

struct RngStream {
  uint64_t seed = 0;
  uint32_t step = 0;
  uint32_t micro_step = 0;
  uint32_t layer = 0;
  RngSite site = RngSite::AttentionProbs;

  // Four uniform 32-bit words for elements 4*block .. 4*block+3. The block index's low 32 bits are the
  // counter's first word and its high bits widen the key, so a tensor of more than 2^34 elements (attention
  // dropout at B*NH*T*T: 16 heads x 8 sequences of 16K tokens) draws fresh words instead of repeating its
  // first 2^34; below that, the words are the ones a 32-bit block index gave.
  GPT_HOST_DEVICE Philox4 block(uint64_t block_index) const {
    Philox4 ctr{{static_cast<uint32_t>(block_index), (layer << 8) | static_cast<uint32_t>(site), micro_step, step}};
    return philox4x32_10(ctr, static_cast<uint32_t>(seed),
                         static_cast<uint32_t>(seed >> 32) ^ static_cast<uint32_t>(block_index >> 32));
  }
  GPT_HOST_DEVICE uint32_t word(uint64_t element) const { return block(element >> 2).v[element & 3]; }
};

// Dropout keeps an element when its uniform word is at or above p * 2^32; kept values are scaled by 1/(1-p).
GPT_HOST_DEVICE uint32_t dropout_threshold(float p) {
  const double t = static_cast<double>(p) * 4294967296.0;
  return t >= 4294967295.0 ? 0xFFFFFFFFu : static_cast<uint32_t>(t);
}

}  // namespace gpt
