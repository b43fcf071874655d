// Op table cases of adamw_update (cuda/kernels/adamw.cu): FP32 masters and moments with gradients in
// every float format the CPU accepts (FP8 with scaling state: read times its scale_inv), odd sizes, an
// unaligned range (what a ZeRO shard's view can be), three steps in a row (the bias corrections change
// with the step), weight decay on and off, a gradient scale, and the BF16/F16 compute copy the update
// may write beside the masters. Every case is bitwise (tolerance 0): both
// backends write each multiply-add as an fma and round every other operation on its own, in one order
// (src/cpu/adamw.cpp), so a GPU, the emulator and the CPU agree to the bit.
#include "cuda/backend/op_table.h"

namespace gpt::test {
namespace {

constexpr double kBitwise = 0.0;

bool is_fp8(DType f) { return f == DType::E4M3 || f == DType::E5M2; }

void steps(OpBench& b, const Tensor& params, const Tensor& grads, const Tensor& m, const Tensor& v, float weight_decay,
           const Tensor& compute = {}) {
  for (int64_t step = 1; step <= 3; ++step) {
    AdamWArgs a;
    a.compute = compute;
    a.params = params;
    a.grads = grads;
    a.m = m;
    a.v = v;
    a.lr = 1e-3f * static_cast<float>(step);
    a.weight_decay = weight_decay;
    a.grad_scale = 0.5f;
    a.step = step;
    b.backend().adamw_update(a);
  }
}

std::vector<OpCase> cases() {
  std::vector<OpCase> out;
  for (DType g : kTableFormats) {
    for (const ElementwiseShape& s : kElementwiseShapes) {
      for (float weight_decay : {0.0f, 0.1f}) {
        const auto dims = s.dims;
        out.push_back({fmt::format("adamw_update/grads-{}/{}/wd{}", format_tag(g), s.tag, weight_decay), [=](OpBench& b) {
                         Tensor params = b.accumulated(dims, DType::F32);
                         Tensor grads = b.input(dims, g);
                         if (is_fp8(g)) grads.scaling = b.fp8_meta(8.0f);
                         Tensor m = b.accumulated(dims, DType::F32, -1e-2f, 1e-2f);
                         Tensor v = b.accumulated(dims, DType::F32, 0.0f, 1e-3f);
                         steps(b, params, grads, m, v, weight_decay);
                       },
                       kBitwise});
      }
    }
    out.push_back({fmt::format("adamw_update/grads-{}/unaligned", format_tag(g)), [=](OpBench& b) {
                     Tensor params = b.accumulated({4099}, DType::F32);
                     Tensor grads = b.input({4099}, g);
                     Tensor m = b.accumulated({4099}, DType::F32, -1e-2f, 1e-2f);
                     Tensor v = b.accumulated({4099}, DType::F32, 0.0f, 1e-3f);
                     steps(b, params.elements(1, 4098), grads.elements(1, 4098), m.elements(1, 4098), v.elements(1, 4098), 0.1f);
                   },
                   kBitwise});
  }
  // The update that also writes the weights' compute copy: the copy is poisoned first and compared, bitwise
  // (both backends round each element once, to nearest even, as their casts do).
  for (DType c : {DType::BF16, DType::F16}) {
    for (const ElementwiseShape& s : kElementwiseShapes) {
      const auto dims = s.dims;
      out.push_back({fmt::format("adamw_update/compute-{}/{}", format_tag(c), s.tag), [=](OpBench& b) {
                       Tensor params = b.accumulated(dims, DType::F32);
                       Tensor grads = b.input(dims, DType::BF16);
                       Tensor m = b.accumulated(dims, DType::F32, -1e-2f, 1e-2f);
                       Tensor v = b.accumulated(dims, DType::F32, 0.0f, 1e-3f);
                       steps(b, params, grads, m, v, 0.1f, b.output(dims, c));
                     },
                     kBitwise});
    }
    out.push_back({fmt::format("adamw_update/compute-{}/unaligned", format_tag(c)), [=](OpBench& b) {
                     Tensor params = b.accumulated({4099}, DType::F32);
                     Tensor grads = b.input({4099}, DType::F32);
                     Tensor m = b.accumulated({4099}, DType::F32, -1e-2f, 1e-2f);
                     Tensor v = b.accumulated({4099}, DType::F32, 0.0f, 1e-3f);
                     Tensor compute = b.output({4099}, c);
                     steps(b, params.elements(1, 4098), grads.elements(1, 4098), m.elements(1, 4098),
                           v.elements(1, 4098), 0.1f, compute.elements(1, 4098));
                   },
                   kBitwise});
  }
  return out;
}

const OpCases registered(cases());

}  // namespace
}  // namespace gpt::test
