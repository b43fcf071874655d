// AdamW with decoupled weight decay (Loshchilov & Hutter), bias-corrected, element-wise
// (src/cpu/adamw.cpp is the reference):
//   g = grad_scale * grad;  m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2
//   param -= lr * (m / (1-b1^step) / (sqrt(v / (1-b2^step)) + eps) + weight_decay * param)
// in FP32 with the CPU's constants (the bias corrections c = 1 / (1 - b^step) computed once on the host in
// double and rounded to FP32, every other constant the FP32 argument) and the CPU's roundings, in its order:
//   g = grad_scale * grad
//   m = fma(b1, m, (1-b1) * g)
//   v = fma(b2, v, ((1-b2) * g) * g)
//   u = fma(weight_decay, param, (m * c1) / (sqrt(v * c2) + eps))
//   param = fma(-lr, u, param)
// written with the round-to-nearest intrinsics (__fmul_rn, __fadd_rn, __fdiv_rn, __fsqrt_rn, __fmaf_rn),
// which nvcc never contracts into a multiply-add whatever -fmad says, and rounds as IEEE whatever -prec-div
// and -prec-sqrt say (cuda/emu's versions keep the host compiler from contracting them too). So the device, the emulator and the CPU backend give
// the same bits, and optimizer offload (AdamW on the host) equals AdamW here.
// Layout: params (the FP32 masters), m and v are F32 and flat; grads is F32, BF16, F16 or FP8 (read times
// its scale_inv). Each thread takes units of 8 consecutive elements: two 128-bit accesses per FP32
// tensor and one for 2-byte gradients when every pointer is aligned (vector_access.cuh), grid-stride.
// The update reads 16 bytes per parameter with FP32 gradients and writes 12, so it runs at memory speed.
// Fused: with AdamWArgs::compute the updated value is also stored in the weights' BF16/F16 compute copy
// (one round-to-nearest-even conversion, the cast kernel's), 2 bytes more per parameter, instead of a
// cast at the next forward that reads the 4-byte masters again and launches once per tensor.
#include "kernels/adamw.h"

#include "backend/op_checks.h"
#include "common/launch.cuh"
#include "common/vector_access.cuh"

#include <algorithm>
#include <cmath>

namespace gpt::cuda {
namespace {

constexpr int kThreads = 256;

struct AdamWConstants {
  float lr, beta1, beta2, one_minus_beta1, one_minus_beta2, eps, weight_decay, grad_scale, inv_correction1,
      inv_correction2;
};

AdamWConstants constants_of(const AdamWArgs& a) {
  AdamWConstants k;
  k.lr = a.lr;
  k.beta1 = a.beta1;
  k.beta2 = a.beta2;
  k.one_minus_beta1 = 1.0f - a.beta1;
  k.one_minus_beta2 = 1.0f - a.beta2;
  k.eps = a.eps;
  k.weight_decay = a.weight_decay;
  k.grad_scale = a.grad_scale;
  k.inv_correction1 = static_cast<float>(1.0 / (1.0 - std::pow(static_cast<double>(a.beta1), static_cast<double>(a.step))));
  k.inv_correction2 = static_cast<float>(1.0 / (1.0 - std::pow(static_cast<double>(a.beta2), static_cast<double>(a.step))));
  return k;
}

__global__ void __launch_bounds__(kThreads)
    adamw_kernel(float* params, TensorRef grads, float* m, float* v, TensorRef compute, int64_t n, AdamWConstants k,
                 bool vector) {
  const float grad_scale_inv = read_scale_inv(grads);
  const TensorRef p_ref{params, DType::F32, nullptr}, m_ref{m, DType::F32, nullptr}, v_ref{v, DType::F32, nullptr};
  for (int64_t i = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) * kPack; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x * kPack) {
    const int count = static_cast<int>(std::min<int64_t>(kPack, n - i));
    float p[kPack], g[kPack], mi[kPack], vi[kPack];
    load_values(p_ref, i, count, vector, p);
    load_values(grads, i, count, vector, g, grad_scale_inv);
    load_values(m_ref, i, count, vector, mi);
    load_values(v_ref, i, count, vector, vi);
    for (int e = 0; e < kPack; ++e) {
      const float gs = __fmul_rn(k.grad_scale, g[e]);
      mi[e] = __fmaf_rn(k.beta1, mi[e], __fmul_rn(k.one_minus_beta1, gs));
      vi[e] = __fmaf_rn(k.beta2, vi[e], __fmul_rn(__fmul_rn(k.one_minus_beta2, gs), gs));
      const float m_hat = __fmul_rn(mi[e], k.inv_correction1);
      const float v_hat = __fmul_rn(vi[e], k.inv_correction2);
      const float update = __fmaf_rn(k.weight_decay, p[e], __fdiv_rn(m_hat, __fadd_rn(__fsqrt_rn(v_hat), k.eps)));
      p[e] = __fmaf_rn(-k.lr, update, p[e]);
    }
    store_values(p_ref, i, count, vector, p);
    store_values(m_ref, i, count, vector, mi);
    store_values(v_ref, i, count, vector, vi);
    if (compute.data != nullptr) store_values(compute, i, count, vector, p);
  }
}

}  // namespace

void adamw_update(const AdamWArgs& args, const DeviceContext& ctx) {
  const int64_t n = check_adamw(args);
  GPT_CHECK(args.params.dtype == DType::F32 && args.m.dtype == DType::F32 && args.v.dtype == DType::F32,
            "adamw_update: params, m and v must be f32 on the CUDA backend (FP32 masters), got {}, {} and {}",
            dtype_name(args.params.dtype), dtype_name(args.m.dtype), dtype_name(args.v.dtype));
  GPT_CHECK(args.grads.dtype == DType::F32 || is_narrow_float(args.grads.dtype),
            "adamw_update: grads is {}; the CUDA backend takes f32, bf16, f16, e4m3 or e5m2 gradients",
            dtype_name(args.grads.dtype));
  if (n == 0) return;
  const bool vector = pack_aligned(args.params) && pack_aligned(args.grads) && pack_aligned(args.m) &&
                      pack_aligned(args.v) && pack_aligned(args.compute);
  launch<adamw_kernel>(dim3(pack_grid(n, kThreads)), dim3(kThreads), 0, ctx.stream, args.params.f32(),
                       tensor_ref(args.grads), args.m.f32(), args.v.f32(), tensor_ref(args.compute), n,
                       constants_of(args), vector);
}

}  // namespace gpt::cuda
