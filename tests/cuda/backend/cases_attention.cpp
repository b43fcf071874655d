// Op table cases of attention_forward / attention_backward (cuda/kernels/attention.cu): qkv in each
// format the recipes compute in (probs and dprobs F32, the recipes' statistics format), B = 2, NH = 3,
// T = 67 (not a multiple of any tile), T = 1 and T = 68 (the row kernels' float4 path), head sizes 8,
// 13 (odd: head views 2-byte aligned in BF16/F16) and 24, dropout off and on. The backward cases run the
// forward first, so probs is a softmax with a zero upper triangle, as the model passes it.
#include "cuda/backend/attention_cases.h"

namespace gpt::test {
namespace {

std::vector<OpCase> cases() {
  // T = 1: a single key (head size 13 alone); T = 68 (a multiple of 4): the row kernels' 128-bit path
  // (head size 8 alone).
  const auto keep = [](const AttentionPoint& a) { return !((a.T == 1 && a.hs != 13) || (a.T == 68 && a.hs != 8)); };
  std::vector<OpCase> out;
  for (const AttentionPoint& a : attention_sweep(2, 3, {67, 1, 68}, {8, 13, 24}, keep)) {
    out.push_back({a.name("attention_forward"), [=](OpBench& b) {
                     Tensor qkv = a.qkv(b);
                     b.backend().attention_forward({a.out(b), b.output({a.B, a.NH, a.T, a.T}, DType::F32), qkv,
                                                    static_cast<int>(a.NH), a.dropout()});
                   }});
    out.push_back({a.name("attention_backward"), [=](OpBench& b) {
                     Tensor qkv = a.qkv(b);
                     Tensor probs = b.output({a.B, a.NH, a.T, a.T}, DType::F32);
                     b.backend().attention_forward({b.scratch({a.B, a.T, a.C()}, a.format), probs, qkv,
                                                    static_cast<int>(a.NH), a.dropout()});
                     b.backend().attention_backward({a.dqkv(b), b.scratch({a.B, a.NH, a.T, a.T}, DType::F32), a.dout(b),
                                                     qkv, probs, static_cast<int>(a.NH), a.dropout()});
                   }});
  }
  return out;
}

const OpCases registered(cases());

}  // namespace
}  // namespace gpt::test
