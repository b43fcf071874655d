// Op table cases of layernorm forward and backward (cuda/kernels/layernorm.cu): every float format for the
// activations and parameters (FP8 with scaling state on inputs and outputs), mean/rstd in F32 and in the
// activations' format, rows of 1 and 67, channels of 200 (vector chunks), 203 (scalar path) and a 3-d
// [2,5,768] input; din, dweight and dbias accumulate. The fused residual ops (residual_layernorm_forward,
// layernorm_residual_backward) in every format, without dropout and with it (a mask that must be the
// CPU's bit for bit), the stream and its branch in different formats, and the backward's branch gradient
// written over dout as the model has it, and an FP8 branch gradient sharing the stream's scaling state.
#include "cuda/backend/op_table.h"

namespace gpt::test {
namespace {

struct Shape {
  int64_t b, t, c;
  std::string tag() const { return fmt::format("{}x{}x{}", b, t, c); }
};

constexpr Shape kShapes[] = {{1, 1, 200}, {1, 67, 203}, {2, 5, 768}};

// A tensor in format f; FP8 ones get scaling state with a scale that is not 1.
Tensor scaled(OpBench& b, Tensor t, float scale) {
  if (t.dtype == DType::E4M3 || t.dtype == DType::E5M2) t.scaling = b.fp8_meta(scale);
  return t;
}

DropoutSpec test_dropout() {
  DropoutSpec d;
  d.p = 0.1f;
  d.stream = RngStream{1234, 7, 1, 3, RngSite::AttentionResidual};
  return d;
}

std::vector<OpCase> fused_cases() {
  std::vector<OpCase> out;
  for (DType f : kTableFormats) {
    for (const Shape s : kShapes) {
      for (const bool drop : {false, true}) {
        const DropoutSpec spec = drop ? test_dropout() : DropoutSpec{};
        const std::string tag = fmt::format("{}/{}/{}", format_tag(f), s.tag(), drop ? "drop" : "nodrop");
        out.push_back({"residual_layernorm_forward/" + tag, [=](OpBench& b) {
                         const Tensor sum = scaled(b, b.output({s.b, s.t, s.c}, f), 2.0f);
                         ResidualLayerNormForwardArgs a;
                         a.residual = {sum, scaled(b, b.input({s.b, s.t, s.c}, f, -2.0f, 2.0f), 2.0f),
                                       scaled(b, b.input({s.b, s.t, s.c}, f), 4.0f), spec};
                         a.norm.in = sum;
                         a.norm.weight = scaled(b, b.input({s.c}, f, 0.5f, 1.5f), 1.0f);
                         a.norm.bias = scaled(b, b.input({s.c}, f), 4.0f);
                         a.norm.out = scaled(b, b.output({s.b, s.t, s.c}, f), 8.0f);
                         // The rows sum U(-2,2) and U(-1,1) values, |x| about 1 on average: their means
                         // cancel towards zero, and err by that size (seen failing one 1x1 row at 9.7e-9
                         // against 8.0e-9 of a mean of 4.0e-4).
                         a.norm.mean = b.output({s.b, s.t}, DType::F32, 1.0);
                         a.norm.rstd = b.output({s.b, s.t}, DType::F32);
                         b.backend().residual_layernorm_forward(a);
                       }});
        out.push_back({"layernorm_residual_backward/" + tag, [=](OpBench& b) {
                         LayerNormResidualBackwardArgs a;
                         a.norm.dout = scaled(b, b.input({s.b, s.t, s.c}, f), 4.0f);
                         a.norm.in = scaled(b, b.input({s.b, s.t, s.c}, f, -2.0f, 3.0f), 2.0f);
                         a.norm.weight = scaled(b, b.input({s.c}, f, 0.5f, 1.5f), 1.0f);
                         a.norm.mean = b.input({s.b, s.t}, DType::F32, 0.0f, 1.0f);
                         a.norm.rstd = b.input({s.b, s.t}, DType::F32, 0.5f, 2.0f);
                         a.norm.din = scaled(b, b.accumulated({s.b, s.t, s.c}, f), 4.0f);
                         a.norm.dweight = scaled(b, b.accumulated({s.c}, f), 2.0f);
                         a.norm.dbias = scaled(b, b.accumulated({s.c}, f), 2.0f);
                         a.residual = {scaled(b, b.output({s.b, s.t, s.c}, f), 8.0f), a.norm.din, spec};
                         b.backend().layernorm_residual_backward(a);
                       }});
      }
    }
  }
  // As a bf16 recipe runs them: a BF16 stream and branch with F32 parameters, gradients and statistics,
  // and the branch's gradient written over dout (one buffer serves every branch gradient in the model).
  for (const bool drop : {false, true}) {
    const DropoutSpec spec = drop ? test_dropout() : DropoutSpec{};
    const std::string tag = fmt::format("mixed_bf16_f32/1x67x203/{}", drop ? "drop" : "nodrop");
    out.push_back({"residual_layernorm_forward/" + tag, [=](OpBench& b) {
                     const Tensor sum = b.output({1, 67, 203}, DType::BF16);
                     b.backend().residual_layernorm_forward(
                         {{sum, b.input({1, 67, 203}, DType::BF16), b.input({1, 67, 203}, DType::BF16), spec},
                          {b.output({1, 67, 203}, DType::BF16), b.output({1, 67}, DType::F32), b.output({1, 67}, DType::F32),
                           sum, b.input({203}, DType::F32, 0.5f, 1.5f), b.input({203}, DType::F32), 1e-5f}});
                   }});
    out.push_back({"layernorm_residual_backward/" + tag + "/dx_over_dout", [=](OpBench& b) {
                     const Tensor dstream = b.accumulated({1, 67, 203}, DType::F32);
                     const Tensor dbranch = b.accumulated({1, 67, 203}, DType::BF16);
                     b.backend().layernorm_residual_backward(
                         {{dstream, b.accumulated({203}, DType::F32), b.accumulated({203}, DType::F32), dbranch,
                           b.input({1, 67, 203}, DType::BF16), b.input({203}, DType::F32, 0.5f, 1.5f),
                           b.input({1, 67}, DType::F32), b.input({1, 67}, DType::F32, 0.5f, 2.0f)},
                          {dbranch, dstream, spec}});
                   }});
  }
  // An FP8 branch gradient that shares the stream gradient's scaling state: the backend cannot fuse the two
  // stores into one pass (both add to one amax, each with its own rounding), and runs the two ops in turn.
  for (const DType f : {DType::E4M3, DType::E5M2}) {
    out.push_back({"layernorm_residual_backward/" + format_tag(f) + "/1x67x203/shared_scaling", [=](OpBench& b) {
                     LayerNormResidualBackwardArgs a;
                     a.norm.dout = scaled(b, b.input({1, 67, 203}, f), 4.0f);
                     a.norm.in = scaled(b, b.input({1, 67, 203}, f, -2.0f, 3.0f), 2.0f);
                     a.norm.weight = b.input({203}, DType::F32, 0.5f, 1.5f);
                     a.norm.mean = b.input({1, 67}, DType::F32, 0.0f, 1.0f);
                     a.norm.rstd = b.input({1, 67}, DType::F32, 0.5f, 2.0f);
                     a.norm.din = scaled(b, b.accumulated({1, 67, 203}, f), 4.0f);
                     a.norm.dweight = b.accumulated({203}, DType::F32);
                     a.norm.dbias = b.accumulated({203}, DType::F32);
                     Tensor dx = b.output({1, 67, 203}, f);
                     dx.scaling = a.norm.din.scaling;
                     a.residual = {dx, a.norm.din, DropoutSpec{}};
                     b.backend().layernorm_residual_backward(a);
                   }});
  }
  return out;
}

std::vector<OpCase> cases() {
  std::vector<OpCase> out;
  for (DType f : kTableFormats) {
    for (const Shape s : kShapes) {
      for (const bool stats_f32 : {true, false}) {
        if (!stats_f32 && f == DType::F32) continue;
        const DType stats = stats_f32 ? DType::F32 : f;
        const std::string tag = fmt::format("{}/stats_{}/{}", format_tag(f), format_tag(stats), s.tag());
        out.push_back({"layernorm_forward/" + tag, [=](OpBench& b) {
                         LayerNormForwardArgs a;
                         a.in = scaled(b, b.input({s.b, s.t, s.c}, f, -2.0f, 3.0f), 2.0f);
                         a.weight = scaled(b, b.input({s.c}, f, 0.5f, 1.5f), 1.0f);
                         a.bias = scaled(b, b.input({s.c}, f), 4.0f);
                         a.out = scaled(b, b.output({s.b, s.t, s.c}, f), 8.0f);
                         a.mean = scaled(b, b.output({s.b, s.t}, stats), 16.0f);
                         a.rstd = scaled(b, b.output({s.b, s.t}, stats), 16.0f);
                         b.backend().layernorm_forward(a);
                       }});
        out.push_back({"layernorm_backward/" + tag, [=](OpBench& b) {
                         LayerNormBackwardArgs a;
                         a.dout = scaled(b, b.input({s.b, s.t, s.c}, f), 4.0f);
                         a.in = scaled(b, b.input({s.b, s.t, s.c}, f, -2.0f, 3.0f), 2.0f);
                         a.weight = scaled(b, b.input({s.c}, f, 0.5f, 1.5f), 1.0f);
                         a.mean = scaled(b, b.input({s.b, s.t}, stats, 0.0f, 1.0f), 16.0f);
                         a.rstd = scaled(b, b.input({s.b, s.t}, stats, 0.5f, 2.0f), 16.0f);
                         a.din = scaled(b, b.accumulated({s.b, s.t, s.c}, f), 4.0f);
                         a.dweight = scaled(b, b.accumulated({s.c}, f), 2.0f);
                         a.dbias = scaled(b, b.accumulated({s.c}, f), 2.0f);
                         b.backend().layernorm_backward(a);
                       }});
      }
    }
  }
  // Mixed formats, as a bf16 recipe has them: bf16 activations with f32 parameters and gradients.
  out.push_back({"layernorm_forward/mixed_bf16_f32/2x5x768", [](OpBench& b) {
                   b.backend().layernorm_forward({b.output({2, 5, 768}, DType::BF16), b.output({2, 5}, DType::F32),
                                                  b.output({2, 5}, DType::F32), b.input({2, 5, 768}, DType::BF16),
                                                  b.input({768}, DType::F32), b.input({768}, DType::F32), 1e-5f});
                 }});
  out.push_back({"layernorm_backward/mixed_bf16_f32/2x5x768", [](OpBench& b) {
                   b.backend().layernorm_backward(
                       {b.accumulated({2, 5, 768}, DType::F32), b.accumulated({768}, DType::F32),
                        b.accumulated({768}, DType::F32), b.input({2, 5, 768}, DType::BF16),
                        b.input({2, 5, 768}, DType::BF16), b.input({768}, DType::F32),
                        b.input({2, 5}, DType::F32), b.input({2, 5}, DType::F32, 0.5f, 2.0f)});
                 }});
  for (OpCase& c : fused_cases()) out.push_back(std::move(c));
  return out;
}

const OpCases registered(cases());

}  // namespace
}  // namespace gpt::test
