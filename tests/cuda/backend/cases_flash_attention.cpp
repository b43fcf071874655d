// Op table cases of the fused attention (cuda/kernels/flash_attention*.cu): the CUDA backend under test
// plans for it (attention_keeps_probs false, the default), so its probs are the [B,NH,T] log-sum-exp and
// its dprobs the [B,NH,T] delta scratch, while the CPU runs the same case materialised; out and dqkv are
// compared. Head size 64 (the tensor-core kernels in BF16/F16) and 13 (the scalar kernels, and FP32),
// B = 2, NH = 2, T = 67 (a ragged tile) and 1, dropout off and on. On tensor cores P (forward) and P and
// dS (backward) enter their products rounded to the format (FlashAttention's choice, where the CPU keeps
// them FP32): one more rounding than the output's. The forward's tolerance scale is 2 (BF16 with dropout
// reached 1.1 x the unscaled tolerance in one of four runs); the backward's is 3, since dS's rows sum to
// zero and dq = s dS k cancels, so dS's rounding shows at the scale of its terms (up to 1.9 x the unscaled
// tolerance in BF16 and F16 over four runs; the materialised path splits dS in two to avoid just this).
#include "cuda/backend/op_table.h"

namespace gpt::test {
namespace {

DropoutSpec dropout_of(float p) {
  DropoutSpec d;
  d.p = p;
  d.stream = RngStream{0x5eed1234abcdull, 7, 1, 2, RngSite::AttentionProbs};
  return d;
}

std::vector<OpCase> cases() {
  constexpr int64_t B = 2, NH = 2;
  std::vector<OpCase> out;
  for (DType f : {DType::F32, DType::BF16, DType::F16})
    for (int64_t hs : {64, 13})
      for (int64_t T : {67, 1})
        for (float p : {0.0f, 0.1f}) {
          if (f == DType::F32 && hs == 64 && T == 1) continue;
          const int64_t C = NH * hs;
          // The backend's own kind of statistics: [B,NH,T,T] probabilities, or the fused [B,NH,T].
          const auto stats = [=](OpBench& b) {
            return b.backend().attention_keeps_probs() ? b.scratch({B, NH, T, T}, DType::F32) : b.scratch({B, NH, T}, DType::F32);
          };
          const std::string shape = fmt::format("B{}_T{}_NH{}_hs{}/p{}", B, T, NH, hs, p);
          out.push_back({fmt::format("flash_attention_forward/{}/{}", format_tag(f), shape), [=](OpBench& b) {
                           Tensor qkv = b.input({B, T, 3 * C}, f);
                           b.backend().attention_forward({b.output({B, T, C}, f), stats(b), qkv, static_cast<int>(NH), dropout_of(p)});
                         },
                         2.0});
          out.push_back({fmt::format("flash_attention_backward/{}/{}", format_tag(f), shape),
                         [=](OpBench& b) {
                           Tensor qkv = b.input({B, T, 3 * C}, f);
                           Tensor probs = stats(b), attended = b.scratch({B, T, C}, f);
                           b.backend().attention_forward({attended, probs, qkv, static_cast<int>(NH), dropout_of(p)});
                           b.backend().attention_backward({b.output({B, T, 3 * C}, f), stats(b), b.input({B, T, C}, f), qkv,
                                                           probs, static_cast<int>(NH), dropout_of(p), attended});
                         },
                         3.0});
        }
  return out;
}

const OpCases registered(cases());

}  // namespace
}  // namespace gpt::test
