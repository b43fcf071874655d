// Op table cases of row softmax forward and backward (cuda/kernels/softmax.cu): every float format (FP8
// with scaling state on inputs and outputs), rows of 67 (scalar path), 200 (vector chunks) and 2050
// (several chunks a thread), one row and many, and in place (out aliasing in, din aliasing dout).
#include "cuda/backend/op_table.h"

namespace gpt::test {
namespace {

struct Shape {
  int64_t rows, cols;
  std::string tag() const { return fmt::format("{}x{}", rows, cols); }
};

constexpr Shape kShapes[] = {{1, 67}, {67, 200}, {3, 2050}};

Tensor scaled(OpBench& b, Tensor t, float scale) {
  if (t.dtype == DType::E4M3 || t.dtype == DType::E5M2) t.scaling = b.fp8_meta(scale);
  return t;
}

std::vector<OpCase> cases() {
  std::vector<OpCase> out;
  for (DType f : kTableFormats) {
    for (const Shape s : kShapes) {
      const std::string tag = fmt::format("{}/{}", format_tag(f), s.tag());
      out.push_back({"softmax_forward/" + tag, [=](OpBench& b) {
                       Tensor in = scaled(b, b.input({s.rows, s.cols}, f, -4.0f, 4.0f), 2.0f);
                       b.backend().softmax_forward({scaled(b, b.output({s.rows, s.cols}, f), 64.0f), in});
                     }});
      out.push_back({"softmax_backward/" + tag, [=](OpBench& b) {
                       Tensor dout = scaled(b, b.input({s.rows, s.cols}, f), 4.0f);
                       Tensor y = scaled(b, b.input({s.rows, s.cols}, f, 0.0f, 1.0f), 8.0f);
                       b.backend().softmax_backward({scaled(b, b.output({s.rows, s.cols}, f), 4.0f), dout, y});
                     }});
    }
  }
  for (DType f : {DType::F32, DType::BF16}) {
    out.push_back({fmt::format("softmax_forward/in_place/{}/5x200", format_tag(f)), [=](OpBench& b) {
                     Tensor x = b.accumulated({5, 200}, f, -4.0f, 4.0f);
                     b.backend().softmax_forward({x, x});
                   }});
    out.push_back({fmt::format("softmax_backward/in_place/{}/5x203", format_tag(f)), [=](OpBench& b) {
                     Tensor g = b.accumulated({5, 203}, f);
                     b.backend().softmax_backward({g, g, b.input({5, 203}, f, 0.0f, 1.0f)});
                   }});
  }
  // Mixed formats: f32 in, bf16 out; bf16 dout and out, f32 din.
  out.push_back({"softmax_forward/mixed_f32_bf16/67x200", [](OpBench& b) {
                   Tensor in = b.input({67, 200}, DType::F32, -4.0f, 4.0f);
                   b.backend().softmax_forward({b.output({67, 200}, DType::BF16), in});
                 }});
  out.push_back({"softmax_backward/mixed_bf16_f32/67x200", [](OpBench& b) {
                   Tensor dout = b.input({67, 200}, DType::BF16);
                   Tensor y = b.input({67, 200}, DType::BF16, 0.0f, 1.0f);
                   b.backend().softmax_backward({b.output({67, 200}, DType::F32), dout, y});
                 }});
  return out;
}

const OpCases registered(cases());

}  // namespace
}  // namespace gpt::test
