// fill: out[i] = value for every element (f32, f64, i32, and the narrow formats: one code, FP8 with its
// scale; a fill records no FP8 statistics). copy: out = in, byte for byte, for tensors of
// equal dtype and element count (shapes may differ: a copy is also how a reshaped buffer is moved).
#include "cpu/convert.h"
#include "cpu/cpu_backend.h"
#include "cpu/dispatch.h"

#include <cstring>

namespace gpt::cpu {
namespace {

// Below this many elements a parallel region costs more than it saves.
constexpr int64_t kParallelMin = 1 << 14;

template <class T>
void fill_kernel(T* out, int64_t n, T value) {
#pragma omp parallel for schedule(static) if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) out[i] = value;
}

}  // namespace

void CpuBackend::fill(const FillArgs& args) {
  const Tensor& out = args.out;
  GPT_CHECK(!out.empty(), "fill: out is empty");
  if (out.dtype == DType::I32) {
    fill_kernel(out.as<int32_t>(), out.numel(), static_cast<int32_t>(args.value));
    return;
  }
  if (is_narrow_float(out.dtype)) {
    // One code for every element: the value encoded as a store would encode it (FP8 with its scale).
    const float x = args.value;
    uint8_t code[2];
    const Tensor one(code, {1}, out.dtype, out.device);
    encode<float>(&x, one, 1, out.scaling ? out.scaling->scale : 1.0f, true);
    if (dtype_size(out.dtype) == 2) {
      uint16_t c;
      std::memcpy(&c, code, 2);
      fill_kernel(out.as<uint16_t>(), out.numel(), c);
    } else {
      fill_kernel(out.as<uint8_t>(), out.numel(), code[0]);
    }
    return;
  }
  dispatch_float(out.dtype, [&]<class T>(T) { fill_kernel(out.as<T>(), out.numel(), static_cast<T>(args.value)); });
}

void CpuBackend::copy(const CopyArgs& args) {
  const Tensor& out = args.out;
  const Tensor& in = args.in;
  GPT_CHECK(!out.empty() && !in.empty(), "copy: out and in must both be given");
  GPT_CHECK(out.dtype == in.dtype, "copy: dtype {} into {}: convert instead", dtype_name(in.dtype), dtype_name(out.dtype));
  GPT_CHECK(out.numel() == in.numel(), "copy: in {} and out {} differ in element count", in.shape_string(), out.shape_string());
  if (out.data != in.data) std::memmove(out.data, in.data, in.bytes());
}

}  // namespace gpt::cpu
