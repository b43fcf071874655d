// Op table cases of sum_of_squares and bias_backward (cuda/kernels/reduce.cu): every float format of the
// input (FP8 with scaling state, read times its scale_inv), f32 and f64 totals, odd sizes including one
// that spans several pass-1 blocks, matrices whose columns are not a multiple of the 8-column packs (the
// scalar path) and that are (the vector path), row counts spanning several row splits, dbias in every
// format, accumulated onto its random start.
#include "cuda/backend/op_table.h"

namespace gpt::test {
namespace {

struct Shape {
  const char* tag;
  std::initializer_list<int64_t> dims;
};

bool is_fp8(DType f) { return f == DType::E4M3 || f == DType::E5M2; }

// Globals: the cases keep the initializer lists, whose arrays must outlive them.
const Shape kSizes[] = {{"n1", {1}}, {"n67", {67}}, {"n4099", {4099}}, {"67x200", {67, 200}}, {"n40009", {40009}}};
const Shape kMatrices[] = {{"1x1", {1, 1}},       {"67x200", {67, 200}}, {"3x67x8", {3, 67, 8}},
                           {"1000x24", {1000, 24}}, {"5x97", {5, 97}},     {"300x264", {300, 264}}};

std::vector<OpCase> cases() {
  std::vector<OpCase> out;
  for (DType f : {DType::F32, DType::F64, DType::BF16, DType::F16, DType::E4M3, DType::E5M2}) {
    for (const Shape& s : kSizes) {
      for (DType total : {DType::F32, DType::F64}) {
        const auto dims = s.dims;
        out.push_back({fmt::format("sum_of_squares/{}/{}/out-{}", format_tag(f), s.tag, format_tag(total)),
                       [=](OpBench& b) {
                         Tensor in = b.input(dims, f);
                         if (is_fp8(f)) in.scaling = b.fp8_meta(0.5f);
                         b.backend().sum_of_squares({b.output({1}, total), in});
                       }});
      }
    }
  }
  for (DType f : kTableFormats) {
    for (const Shape& s : kMatrices) {
      const auto dims = s.dims;
      const int64_t columns = *(dims.end() - 1);
      out.push_back({fmt::format("bias_backward/{}/{}", format_tag(f), s.tag), [=](OpBench& b) {
                       Tensor dout = b.input(dims, f);
                       Tensor dbias = b.accumulated({columns}, f);
                       if (is_fp8(f)) dout.scaling = b.fp8_meta(2.0f), dbias.scaling = b.fp8_meta(0.125f);
                       b.backend().bias_backward({dbias, dout});
                     }});
    }
  }
  // The model's mixed case: a BF16 output gradient into an F32 bias gradient.
  out.push_back({"bias_backward/bf16-f32/1000x24", [](OpBench& b) {
                   b.backend().bias_backward({b.accumulated({24}, DType::F32), b.input({1000, 24}, DType::BF16)});
                 }});
  return out;
}

const OpCases registered(cases());

}  // namespace
}  // namespace gpt::test
