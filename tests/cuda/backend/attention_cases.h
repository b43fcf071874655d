// What the op table's two attention families share (cases_attention.cpp: the materialised kernels,
// cases_flash_attention.cpp: the fused ones): the sweep of formats x sequence lengths x head sizes x
// dropout off and on, each point's case names, tensors and dropout stream. The families differ in the
// statistics they keep for backward and in their tolerances, which stay in their files.
#pragma once

#include "cuda/backend/op_table.h"

#include <fmt/format.h>

#include <functional>
#include <string>
#include <vector>

namespace gpt::test {

struct AttentionPoint {
  DType format = DType::F32;
  int64_t B = 0, NH = 0, T = 0, hs = 0;
  float p = 0.0f;  // dropout

  int64_t C() const { return NH * hs; }
  // "attention_forward/bf16/B2_T67_NH3_hs8/p0.1"
  std::string name(const char* op) const {
    return fmt::format("{}/{}/B{}_T{}_NH{}_hs{}/p{}", op, format_tag(format), B, T, NH, hs, p);
  }
  DropoutSpec dropout() const {
    DropoutSpec d;
    d.p = p;
    d.stream = RngStream{0x5eed1234abcdull, 7, 1, 2, RngSite::AttentionProbs};
    return d;
  }
  Tensor qkv(OpBench& b) const { return b.input({B, T, 3 * C()}, format); }
  Tensor dout(OpBench& b) const { return b.input({B, T, C()}, format); }
  Tensor out(OpBench& b) const { return b.output({B, T, C()}, format); }
  Tensor dqkv(OpBench& b) const { return b.output({B, T, 3 * C()}, format); }
};

// Every format the recipes compute attention in (F32, BF16, F16) x Ts x head_sizes x dropout 0 and 0.1,
// less the points `keep` refuses.
inline std::vector<AttentionPoint> attention_sweep(int64_t B, int64_t NH, const std::vector<int64_t>& Ts,
                                                   const std::vector<int64_t>& head_sizes,
                                                   const std::function<bool(const AttentionPoint&)>& keep) {
  std::vector<AttentionPoint> out;
  for (DType f : {DType::F32, DType::BF16, DType::F16})
    for (int64_t T : Ts)
      for (int64_t hs : head_sizes)
        for (float p : {0.0f, 0.1f}) {
          const AttentionPoint point{f, B, NH, T, hs, p};
          if (keep(point)) out.push_back(point);
        }
  return out;
}

}  // namespace gpt::test
