// Op table cases of attention_forward / attention_backward (cuda/kernels/attention.cu): qkv in each
// format the recipes compute in (probs and dprobs F32, the recipes' statistics format), B = 2, NH = 3,
// T = 67 (not a multiple of any tile), T = 1 and T = 68 (the row kernels' float4 path), head sizes 8,
// 13 (odd: head views 2-byte aligned in BF16/F16) and 24, dropout off and on. The backward cases run the
// forward first, so probs is a softmax with a zero upper triangle, as the model passes it.
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
  constexpr int64_t B = 2, NH = 3;
  std::vector<OpCase> out;
  for (DType f : {DType::F32, DType::BF16, DType::F16})
    for (int64_t T : {67, 1, 68})
      for (int64_t hs : {8, 13, 24})
        for (float p : {0.0f, 0.1f}) {
          // T = 1: a single key; T = 68 (a multiple of 4): the row kernels' 128-bit path.
          if ((T == 1 && hs != 13) || (T == 68 && hs != 8)) continue;
          const int64_t C = NH * hs;
          const std::string shape = fmt::format("B{}_T{}_NH{}_hs{}/p{}", B, T, NH, hs, p);
          out.push_back({fmt::format("attention_forward/{}/{}", format_tag(f), shape), [=](OpBench& b) {
                           Tensor qkv = b.input({B, T, 3 * C}, f);
                           b.backend().attention_forward(
                               {b.output({B, T, C}, f), b.output({B, NH, T, T}, DType::F32), qkv, static_cast<int>(NH), dropout_of(p)});
                         }});
          out.push_back({fmt::format("attention_backward/{}/{}", format_tag(f), shape), [=](OpBench& b) {
                           Tensor qkv = b.input({B, T, 3 * C}, f);
                           Tensor probs = b.output({B, NH, T, T}, DType::F32);
                           b.backend().attention_forward({b.scratch({B, T, C}, f), probs, qkv, static_cast<int>(NH), dropout_of(p)});
                           b.backend().attention_backward({b.output({B, T, 3 * C}, f), b.scratch({B, NH, T, T}, DType::F32),
                                                           b.input({B, T, C}, f), qkv, probs, static_cast<int>(NH),
                                                           dropout_of(p)});
                         }});
        }
  return out;
}

const OpCases registered(cases());

}  // namespace
}  // namespace gpt::test
