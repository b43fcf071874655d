// Tensor: a non-owning view (pointer, shape, dtype, device). Storage belongs to an Arena; views are
// cheap to copy and are what the Backend ops take. Row-major, contiguous.
#pragma once

#include "core/dtype.h"
#include "core/error.h"

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>

namespace gpt {

struct Tensor {
  static constexpr int kMaxDims = 5;

  void* data = nullptr;
  std::array<int64_t, kMaxDims> shape{};
  int ndim = 0;
  DType dtype = DType::F32;
  Device device = Device::CPU;

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
    GPT_CHECK(t.numel() == numel(), "reshape {} -> {} changes the element count", shape_string(), t.shape_string());
    return t;
  }
  // The leading elements of the storage seen with a smaller shape: a micro-batch smaller than the
  // one a buffer was planned for.
  Tensor prefix(std::initializer_list<int64_t> dims) const {
    Tensor t(data, dims, dtype, device);
    GPT_CHECK(t.numel() <= numel(), "view {} does not fit in buffer {}", t.shape_string(), shape_string());
    return t;
  }
  // Elements [offset, offset + count) of the storage in row-major order, as a 1-D tensor.
  Tensor elements(int64_t offset, int64_t count) const {
    GPT_CHECK(offset >= 0 && count >= 0 && offset + count <= numel(), "elements [{}, {}) outside buffer {}", offset,
              offset + count, shape_string());
    return Tensor(static_cast<char*>(data) + static_cast<size_t>(offset) * dtype_size(dtype), {count}, dtype, device);
  }
  // Slice i along the first dimension.
  Tensor operator[](int64_t i) const {
    GPT_CHECK(ndim >= 1 && i >= 0 && i < shape[0], "index {} out of range for shape {}", i, shape_string());
    Tensor t;
    t.dtype = dtype;
    t.device = device;
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
