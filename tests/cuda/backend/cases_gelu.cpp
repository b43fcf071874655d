// Op table cases of gelu_forward and gelu_backward (cuda/kernels/gelu.cu): every float format, odd sizes
// (the scalar tail), an unaligned view (the scalar path throughout), FP8 tensors with scaling state (read
// times scale_inv, stored with the scale and statistics), backward in place (din aliasing dout).
#include "cuda/backend/op_table.h"

namespace gpt::test {
namespace {

bool is_fp8(DType f) { return f == DType::E4M3 || f == DType::E5M2; }

// GELU's interesting range is a few units either side of 0; FP8 inputs hold codes in it.
constexpr float kLo = -4.0f, kHi = 4.0f;

std::vector<OpCase> cases() {
  std::vector<OpCase> out;
  for (DType f : kTableFormats) {
    for (const ElementwiseShape& s : kElementwiseShapes) {
      const auto dims = s.dims;
      out.push_back({fmt::format("gelu_forward/{}/{}", format_tag(f), s.tag), [=](OpBench& b) {
                       Tensor in = b.input(dims, f, kLo, kHi);
                       Tensor o = b.output(dims, f);
                       if (is_fp8(f)) in.scaling = b.fp8_meta(2.0f), o.scaling = b.fp8_meta(16.0f);
                       b.backend().gelu_forward({o, in});
                     }});
      out.push_back({fmt::format("gelu_backward/{}/{}", format_tag(f), s.tag), [=](OpBench& b) {
                       Tensor dout = b.input(dims, f), in = b.input(dims, f, kLo, kHi);
                       Tensor din = b.output(dims, f);
                       if (is_fp8(f)) dout.scaling = b.fp8_meta(4.0f), din.scaling = b.fp8_meta(64.0f);
                       b.backend().gelu_backward({din, dout, in});
                     }});
    }
    out.push_back({fmt::format("gelu_backward/{}/n4099/inplace", format_tag(f)), [=](OpBench& b) {
                     Tensor dout = b.accumulated({4099}, f), in = b.input({4099}, f, kLo, kHi);
                     b.backend().gelu_backward({dout, dout, in});
                   }});
    out.push_back({fmt::format("gelu_forward/{}/unaligned", format_tag(f)), [=](OpBench& b) {
                     Tensor in = b.input({4099}, f, kLo, kHi);
                     Tensor o = b.output({4099}, f);
                     b.backend().fill({o.elements(0, 1), 0.0f});
                     b.backend().gelu_forward({o.elements(1, 4098), in.elements(1, 4098)});
                   }});
  }
  // Mixed formats: a BF16 input to an F32 output and the reverse (the model's narrow recipes).
  out.push_back({"gelu_forward/bf16-f32/67x200", [](OpBench& b) {
                   b.backend().gelu_forward({b.output({67, 200}, DType::F32), b.input({67, 200}, DType::BF16, kLo, kHi)});
                 }});
  out.push_back({"gelu_backward/f32-bf16/67x200", [](OpBench& b) {
                   b.backend().gelu_backward({b.output({67, 200}, DType::BF16), b.input({67, 200}, DType::F32),
                                              b.input({67, 200}, DType::BF16, kLo, kHi)});
                 }});
  return out;
}

const OpCases registered(cases());

}  // namespace
}  // namespace gpt::test
