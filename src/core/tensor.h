// Tensor: a non-owning view (pointer, shape, dtype, device, and for FP8 its scaling state). Storage
// belongs to an Arena; views are cheap to copy and are what the Backend ops take. Row-major, contiguous.
#pragma once

#include "core/dtype.h"
#include "core/error.h"

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>

namespace gpt {

// The per-tensor scaling state of an FP8 tensor, in backend memory next to the data, as Transformer
// Engine's Float8Tensor carries data, scale, scale_inv and amax together. The tensor holds
// codes q = convert(x * scale); its values are q * scale_inv. An op that writes the tensor reads scale
// and adds to amax (max |x| of the unscaled values) and to the counts; an op that reads it multiplies by
// scale_inv (the matrix product applies both operands' scale_inv to its FP32 accumulator, as cuBLASLt's
// FP8 product does). amax and the counts are running totals over a step; whoever owns the state zeroes
// them when it reads them. Host code dereferences it only on a CPU backend.
struct Fp8Meta {
  float scale = 1.0f;
  float scale_inv = 1.0f;
  float amax = 0.0f;       // NaN once a NaN was cast
  int32_t underflows = 0;  // nonzero values stored as +-0
  int32_t saturated = 0;   // values whose scaled magnitude rounded above the format's max
};

struct Tensor {
  static constexpr int kMaxDims = 5;

  void* data = nullptr;
  std::array<int64_t, kMaxDims> shape{};
  int ndim = 0;
  DType dtype = DType::F32;
  Device device = Device::CPU;
  // FP8 only, optional: where the scaling state lives (null: scale 1, no statistics).
  Fp8Meta* scaling = nullptr;

  Tensor() = default;
  Tensor(void* ptr, std::initializer_list<int64_t> dims, DType type = DType::F32, Device dev = Device::CPU)
      : data(ptr), dtype(type), device(dev) {
    GPT_CHECK(dims.size() <= static_cast<size_t>(kMaxDims), "tensor rank {} exceeds {}", dims.size(), kMaxDims);
    for (int64_t d : dims) shape[ndim++] = d;
  }

  bool empty() const { return data == nullptr; }
  int64_t dim(int i) const { return shape[i < 0 ? ndim + i : i]; }
  int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < ndim; ++i) n *= shape[i];
    return n;
  }
  size_t bytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype); }

  template <typename T>
  T* as() const { return static_cast<T*>(data); }
  float* f32() const {
    GPT_CHECK(dtype == DType::F32, "expected an f32 tensor, got {}", dtype_name(dtype));
    return static_cast<float*>(data);
  }
  int32_t* i32() const {
    GPT_CHECK(dtype == DType::I32, "expected an i32 tensor, got {}", dtype_name(dtype));
    return static_cast<int32_t*>(data);
  }

  // The same storage seen with another shape of equal element count.
  Tensor reshaped(std::initializer_list<int64_t> dims) const {
    Tensor t(data, dims, dtype, device);
    t.scaling = scaling;
    GPT_CHECK(t.numel() == numel(), "reshape {} -> {} changes the element count", shape_string(), t.shape_string());
    return t;
  }
  // The leading elements of the storage seen with a smaller shape: a micro-batch smaller than the
  // one a buffer was planned for.
  Tensor prefix(std::initializer_list<int64_t> dims) const {
    Tensor t(data, dims, dtype, device);
    t.scaling = scaling;
    GPT_CHECK(t.numel() <= numel(), "view {} does not fit in buffer {}", t.shape_string(), shape_string());
    return t;
  }
  // Elements [offset, offset + count) of the storage in row-major order, as a 1-D tensor.
  Tensor elements(int64_t offset, int64_t count) const {
    GPT_CHECK(offset >= 0 && count >= 0 && offset + count <= numel(), "elements [{}, {}) outside buffer {}", offset,
              offset + count, shape_string());
    Tensor t(static_cast<char*>(data) + static_cast<size_t>(offset) * dtype_size(dtype), {count}, dtype, device);
    t.scaling = scaling;
    return t;
  }
  // Slice i along the first dimension.
  Tensor operator[](int64_t i) const {
    GPT_CHECK(ndim >= 1 && i >= 0 && i < shape[0], "index {} out of range for shape {}", i, shape_string());
    Tensor t;
    t.dtype = dtype;
    t.device = device;
    t.scaling = scaling;
    t.ndim = ndim - 1;
    for (int d = 1; d < ndim; ++d) t.shape[d - 1] = shape[d];
    t.data = static_cast<char*>(data) + static_cast<size_t>(i) * t.bytes();
    return t;
  }

  std::string shape_string() const {
    std::string s = "(";
    for (int i = 0; i < ndim; ++i) s += (i ? "," : "") + std::to_string(shape[i]);
    return s + ")";
  }
};

}  // namespace gpt
