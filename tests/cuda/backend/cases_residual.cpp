// Op table cases of residual_forward and residual_backward (cuda/kernels/residual.cu): every float format,
// odd sizes, dropout off and on (p = 0.1 from two different RngStreams: the masks must be the CPU's bit
// for bit, or the outputs differ by whole elements), in place (out aliasing residual, dx aliasing dout),
// an unaligned view, FP8 tensors with scaling state, and the backward's copy and convert paths.
#include "cuda/backend/op_table.h"

namespace gpt::test {
namespace {

bool is_fp8(DType f) { return f == DType::E4M3 || f == DType::E5M2; }

struct Drop {
  const char* tag;
  DropoutSpec spec;
};

std::vector<Drop> dropouts() {
  DropoutSpec a;
  a.p = 0.1f;
  a.stream = RngStream{1234, 7, 1, 3, RngSite::AttentionResidual};
  DropoutSpec b = a;
  b.stream = RngStream{0x9E3779B97F4A7C15ull, 2, 0, 11, RngSite::MlpResidual};
  return {{"nodrop", DropoutSpec{}}, {"drop-a", a}, {"drop-b", b}};
}

std::vector<OpCase> cases() {
  std::vector<OpCase> out;
  for (DType f : kTableFormats) {
    for (const ElementwiseShape& s : kElementwiseShapes) {
      for (const Drop& d : dropouts()) {
        const auto dims = s.dims;
        const DropoutSpec spec = d.spec;
        out.push_back({fmt::format("residual_forward/{}/{}/{}", format_tag(f), s.tag, d.tag), [=](OpBench& b) {
                         Tensor residual = b.input(dims, f), x = b.input(dims, f);
                         Tensor o = b.output(dims, f);
                         if (is_fp8(f)) residual.scaling = b.fp8_meta(2.0f), o.scaling = b.fp8_meta(32.0f);
                         b.backend().residual_forward({o, residual, x, spec});
                       }});
        out.push_back({fmt::format("residual_backward/{}/{}/{}", format_tag(f), s.tag, d.tag), [=](OpBench& b) {
                         Tensor dout = b.input(dims, f);
                         Tensor dx = b.output(dims, f);
                         if (is_fp8(f)) dout.scaling = b.fp8_meta(4.0f), dx.scaling = b.fp8_meta(64.0f);
                         b.backend().residual_backward({dx, dout, spec});
                       }});
      }
    }
    for (const Drop& d : dropouts()) {
      const DropoutSpec spec = d.spec;
      out.push_back({fmt::format("residual_forward/{}/n4099/{}/inplace", format_tag(f), d.tag), [=](OpBench& b) {
                       Tensor residual = b.accumulated({4099}, f), x = b.input({4099}, f);
                       b.backend().residual_forward({residual, residual, x, spec});
                     }});
      out.push_back({fmt::format("residual_backward/{}/n4099/{}/inplace", format_tag(f), d.tag), [=](OpBench& b) {
                       Tensor dout = b.accumulated({4099}, f);
                       b.backend().residual_backward({dout, dout, spec});
                     }});
      // From element 1 on: misaligned packs, and mask elements that do not start a Philox block.
      out.push_back({fmt::format("residual_forward/{}/unaligned/{}", format_tag(f), d.tag), [=](OpBench& b) {
                       Tensor residual = b.input({4099}, f), x = b.input({4099}, f);
                       Tensor o = b.output({4099}, f);
                       b.backend().fill({o.elements(0, 1), 0.0f});
                       b.backend().residual_forward({o.elements(1, 4098), residual.elements(1, 4098), x.elements(1, 4098), spec});
                     }});
    }
  }
  // The backward between formats (an F32 gradient into a BF16 branch and the reverse), with and without dropout.
  for (const Drop& d : dropouts()) {
    const DropoutSpec spec = d.spec;
    out.push_back({fmt::format("residual_backward/f32-bf16/67x200/{}", d.tag), [=](OpBench& b) {
                     b.backend().residual_backward({b.output({67, 200}, DType::BF16), b.input({67, 200}, DType::F32), spec});
                   }});
    out.push_back({fmt::format("residual_forward/bf16+f32-f32/67x200/{}", d.tag), [=](OpBench& b) {
                     b.backend().residual_forward({b.output({67, 200}, DType::F32), b.input({67, 200}, DType::F32),
                                                   b.input({67, 200}, DType::BF16), spec});
                   }});
  }
  return out;
}

const OpCases registered(cases());

}  // namespace
}  // namespace gpt::test
