// Residual add with dropout on the branch, element-wise over any shape (src/cpu/residual.cpp is the
// reference; the flat index i is the dropout element):
//   forward   out = residual + keep(i) * x / (1-p)      (out may alias residual or x)
//   backward  dx  = keep(i) * dout / (1-p)               (dx may alias dout; the residual's gradient is dout)
// keep(i) is the CPU's rule (src/cpu/dropout.h, drawn by common/dropout_chunk.cuh): stream.word(i) >=
// dropout_threshold(p), one Philox4x32-10 block per 4 consecutive elements, so the GPU draws the CPU's
// mask bit for bit in any thread layout.
// With dropout the branch is scaled in double, as the CPU does, before the one rounding to FP32 (and then
// to the output's format); without it the sum is the FP32 residual + x.
// Layout: flat, any float format per tensor but F64 (FP8 read times its scale_inv, stored with its scale
// and statistics). Each thread takes units of 8 consecutive elements (two Philox blocks), one 128-bit
// access per tensor when every pointer is aligned (vector_access.cuh), grid-stride. Fused: the mask is
// drawn where it is applied, never stored. Backward without dropout between tensors of one format and
// scaling state is a byte copy on the stream.
#include "kernels/residual.h"

#include "backend/op_checks.h"
#include "common/cuda_check.h"
#include "common/dropout_chunk.cuh"
#include "common/launch.cuh"
#include "common/vector_access.cuh"

#include <algorithm>

namespace gpt::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads)
    residual_forward_kernel(TensorRef out, TensorRef residual, TensorRef x, int64_t n, DropoutRule dropout, bool vector) {
  const float residual_scale_inv = read_scale_inv(residual), x_scale_inv = read_scale_inv(x);
  const float out_scale = write_scale(out);
  Fp8Tally tally;
  Fp8Tally* out_tally = tally_of(out, tally);
  for_each_pack(n, [&](int64_t i, int count) {
    float r[kPack], v[kPack];
    load_values(residual, i, count, vector, r, residual_scale_inv);
    load_values(x, i, count, vector, v, x_scale_inv);
    if (dropout.active) {
      bool keep[kPack];
      dropout_keep(dropout, static_cast<uint64_t>(i), keep);
      for (int k = 0; k < kPack; ++k) {
        const double branch = keep[k] ? v[k] * dropout.scale : 0.0;
        v[k] = static_cast<float>(r[k] + branch);
      }
    } else {
      for (int k = 0; k < kPack; ++k) v[k] = r[k] + v[k];
    }
    store_values(out, i, count, vector, v, out_scale, true, out_tally);
  });
  flush_fp8_tally(out_tally ? out.scaling : nullptr, tally);
}

__global__ void __launch_bounds__(kThreads)
    residual_backward_kernel(TensorRef dx, TensorRef dout, int64_t n, DropoutRule dropout, bool vector) {
  const float dout_scale_inv = read_scale_inv(dout), dx_scale = write_scale(dx);
  Fp8Tally tally;
  Fp8Tally* dx_tally = tally_of(dx, tally);
  for_each_pack(n, [&](int64_t i, int count) {
    float g[kPack];
    load_values(dout, i, count, vector, g, dout_scale_inv);
    if (dropout.active) {
      bool keep[kPack];
      dropout_keep(dropout, static_cast<uint64_t>(i), keep);
      for (int k = 0; k < kPack; ++k) g[k] = keep[k] ? static_cast<float>(g[k] * dropout.scale) : 0.0f;
    }
    store_values(dx, i, count, vector, g, dx_scale, true, dx_tally);
  });
  flush_fp8_tally(dx_tally ? dx.scaling : nullptr, tally);
}

}  // namespace

void residual_forward(const ResidualForwardArgs& args, const DeviceContext& ctx) {
  check_residual_forward(args);
  check_elementwise_format(args.out, "residual_forward", "out");
  check_elementwise_format(args.residual, "residual_forward", "residual");
  check_elementwise_format(args.x, "residual_forward", "x");
  const DropoutRule dropout = dropout_rule(args.dropout);
  const int64_t n = args.x.numel();
  if (n == 0) return;
  const bool vector = pack_aligned(args.out) && pack_aligned(args.residual) && pack_aligned(args.x);
  launch<residual_forward_kernel>(dim3(pack_grid(n, kThreads)), dim3(kThreads), 0, ctx.stream, tensor_ref(args.out),
                                  tensor_ref(args.residual), tensor_ref(args.x), n, dropout, vector);
}

void residual_backward(const ResidualBackwardArgs& args, const DeviceContext& ctx) {
  check_residual_backward(args);
  check_elementwise_format(args.dx, "residual_backward", "dx");
  check_elementwise_format(args.dout, "residual_backward", "dout");
  const DropoutRule dropout = dropout_rule(args.dropout);
  const int64_t n = args.dout.numel();
  if (n == 0) return;
  if (!dropout.active && args.dx.dtype == args.dout.dtype && args.dx.scaling == args.dout.scaling) {
    if (args.dx.data != args.dout.data)
      CUDA_CHECK(cudaMemcpyAsync(args.dx.data, args.dout.data, args.dout.bytes(), cudaMemcpyDeviceToDevice, ctx.stream));
    return;
  }
  const bool vector = pack_aligned(args.dx) && pack_aligned(args.dout);
  launch<residual_backward_kernel>(dim3(pack_grid(n, kThreads)), dim3(kThreads), 0, ctx.stream, tensor_ref(args.dx),
                                   tensor_ref(args.dout), n, dropout, vector);
}

}  // namespace gpt::cuda
