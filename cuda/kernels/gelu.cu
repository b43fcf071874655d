// GELU, tanh approximation, element-wise over any shape (src/cpu/gelu.cpp is the reference):
//   u = s (x + 0.044715 x^3), s = sqrt(2/pi);  out = 0.5 x (1 + tanh u)
//   dgelu/dx = 0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) s (1 + 3 * 0.044715 x^2)
// in FP32 in the CPU's logistic form: with e = exp(-2u) and sig = 1 / (1 + e), out = x / (1 + e) and
// dgelu/dx = sig + 2 x s (1 + 3 * 0.044715 x^2) e sig^2 (e capped at exp(88) so e * sig^2 stays finite),
// one expf per element and no cancellation where 1 + tanh u is small. The GPU's expf and the CPU's exp_f32
// are both within 2 ulp, so results agree to a few FP32 ulp before the output's rounding.
// Backward overwrites din = dout * dgelu(in); din may alias dout (each element is read before it is
// written, by the thread that writes it).
// Layout: flat, any float format per tensor (FP8 read times its scale_inv, stored with its scale and
// statistics); F64 is the CPU's gradient-check format and is refused. Each thread takes units of 8
// consecutive elements, one 128-bit access per tensor when every pointer is aligned (vector_access.cuh),
// grid-stride. Nothing is fused.
#include "kernels/gelu.h"

#include "backend/op_checks.h"
#include "common/launch.cuh"
#include "common/vector_access.cuh"

#include <algorithm>

namespace gpt::cuda {
namespace {

constexpr int kThreads = 256;
constexpr float kGeluScale = 0.7978845608028654f;  // sqrt(2/pi)
constexpr float kGeluCubic = 0.044715f;
constexpr float kExpCap = 88.0f;

__device__ __forceinline__ float gelu(float x) {
  const float u = kGeluScale * (x + kGeluCubic * x * x * x);
  return x / (1.0f + expf(-2.0f * u));
}

__device__ __forceinline__ float gelu_grad(float x) {
  const float x2 = x * x;
  const float u = kGeluScale * (x + kGeluCubic * x2 * x);
  const float e = expf(fminf(-2.0f * u, kExpCap));
  const float sig = 1.0f / (1.0f + e);
  return sig + 2.0f * x * kGeluScale * (1.0f + 3.0f * kGeluCubic * x2) * (e * sig) * sig;
}

__global__ void __launch_bounds__(kThreads) gelu_forward_kernel(TensorRef out, TensorRef in, int64_t n, bool vector) {
  const float in_scale_inv = read_scale_inv(in), out_scale = write_scale(out);
  Fp8Tally tally;
  Fp8Tally* out_tally = tally_of(out, tally);
  for_each_pack(n, [&](int64_t i, int count) {
    float v[kPack];
    load_values(in, i, count, vector, v, in_scale_inv);
    for (int k = 0; k < kPack; ++k) v[k] = gelu(v[k]);
    store_values(out, i, count, vector, v, out_scale, true, out_tally);
  });
  flush_fp8_tally(out_tally ? out.scaling : nullptr, tally);
}

__global__ void __launch_bounds__(kThreads)
    gelu_backward_kernel(TensorRef din, TensorRef dout, TensorRef in, int64_t n, bool vector) {
  const float dout_scale_inv = read_scale_inv(dout), in_scale_inv = read_scale_inv(in), din_scale = write_scale(din);
  Fp8Tally tally;
  Fp8Tally* din_tally = tally_of(din, tally);
  for_each_pack(n, [&](int64_t i, int count) {
    float g[kPack], x[kPack];
    load_values(dout, i, count, vector, g, dout_scale_inv);
    load_values(in, i, count, vector, x, in_scale_inv);
    for (int k = 0; k < kPack; ++k) g[k] = gelu_grad(x[k]) * g[k];
    store_values(din, i, count, vector, g, din_scale, true, din_tally);
  });
  flush_fp8_tally(din_tally ? din.scaling : nullptr, tally);
}

}  // namespace

void gelu_forward(const GeluForwardArgs& args, const DeviceContext& ctx) {
  check_gelu_forward(args);
  check_elementwise_format(args.out, "gelu_forward", "out");
  check_elementwise_format(args.in, "gelu_forward", "in");
  const int64_t n = args.in.numel();
  if (n == 0) return;
  const bool vector = pack_aligned(args.out) && pack_aligned(args.in);
  launch<gelu_forward_kernel>(dim3(pack_grid(n, kThreads)), dim3(kThreads), 0, ctx.stream, tensor_ref(args.out),
                              tensor_ref(args.in), n, vector);
}

void gelu_backward(const GeluBackwardArgs& args, const DeviceContext& ctx) {
  check_gelu_backward(args);
  check_elementwise_format(args.din, "gelu_backward", "din");
  check_elementwise_format(args.dout, "gelu_backward", "dout");
  check_elementwise_format(args.in, "gelu_backward", "in");
  const int64_t n = args.in.numel();
  if (n == 0) return;
  const bool vector = pack_aligned(args.din) && pack_aligned(args.dout) && pack_aligned(args.in);
  launch<gelu_backward_kernel>(dim3(pack_grid(n, kThreads)), dim3(kThreads), 0, ctx.stream, tensor_ref(args.din),
                               tensor_ref(args.dout), tensor_ref(args.in), n, vector);
}

}  // namespace gpt::cuda
