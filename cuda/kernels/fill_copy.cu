// fill: out[i] = value, stored in out's format (FP8: value * scale, as the CPU's fill; no statistics),
// or the integer value for an i32 tensor.
// copy: out[i] = in[i] for tensors of one format and element count: a byte copy on the stream, which is
// exact for every format (an FP8 copy keeps its codes; the scaling state is the caller's to share).
// One thread per element, grid-stride; nothing is fused.
#include "kernels/fill_copy.h"

#include "common/cuda_check.h"
#include "common/launch.cuh"
#include "common/tensor_access.cuh"

#include <algorithm>

namespace gpt::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads) fill_kernel(TensorRef out, int64_t n, float value) {
  const float scale = write_scale(out);
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    if (out.dtype == DType::I32) static_cast<int32_t*>(out.data)[i] = static_cast<int32_t>(value);
    else store(out, i, value, scale, true);
  }
}

int grid_for(int64_t n) { return static_cast<int>(std::clamp<int64_t>((n + kThreads - 1) / kThreads, 1, 65535)); }

}  // namespace

void fill(const FillArgs& args, const DeviceContext& ctx) {
  const int64_t n = args.out.numel();
  if (n == 0) return;
  GPT_CHECK(!args.out.empty(), "fill: out is empty");
  // Zero is the all-zero bit pattern in every format (scaled or not: 0 * scale = +0).
  if (args.value == 0.0f) {
    CUDA_CHECK(cudaMemsetAsync(args.out.data, 0, args.out.bytes(), ctx.stream));
    return;
  }
  launch<fill_kernel>(dim3(grid_for(n)), dim3(kThreads), 0, ctx.stream, tensor_ref(args.out), n, args.value);
}

void copy(const CopyArgs& args, const DeviceContext& ctx) {
  GPT_CHECK(args.out.numel() == args.in.numel() && args.out.dtype == args.in.dtype,
            "copy: out {} {} and in {} {} differ in element count or format", dtype_name(args.out.dtype),
            args.out.shape_string(), dtype_name(args.in.dtype), args.in.shape_string());
  if (args.out.data == args.in.data || args.out.numel() == 0) return;
  CUDA_CHECK(cudaMemcpyAsync(args.out.data, args.in.data, args.out.bytes(), cudaMemcpyDeviceToDevice, ctx.stream));
}

}  // namespace gpt::cuda
