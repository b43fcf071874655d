// Packs of kPack = 8 consecutive elements of a tensor, moved with 128-bit memory operations: one 16-byte
// load for BF16/F16, two for F32, four for F64, one 8-byte load for FP8. A pack starts at an element index
// that is a multiple of 8, so it is aligned whenever the tensor's base pointer is (pack_aligned, checked
// on the host once per launch). The values are decoded and encoded with tensor_access.cuh's functions,
// so a pack holds exactly what eight scalar load()/store() calls would. load_values/store_values take the
// pack path for a whole pack of an aligned tensor and the scalar path for a tail (or a misaligned
// tensor), so an element-wise kernel walks its elements in units of 8 either way.
#pragma once

#include "common/tensor_access.cuh"

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace gpt::cuda {

constexpr int kPack = 8;

// Host: whether data of format dtype allows pack loads (16 bytes, 8 for the one-byte FP8 formats).
inline bool pack_aligned(const void* data, DType dtype) {
  return reinterpret_cast<uintptr_t>(data) % std::min<size_t>(16, kPack * dtype_size(dtype)) == 0;
}
// The same for a tensor's base pointer; an empty tensor does not hold a kernel back.
inline bool pack_aligned(const Tensor& t) { return t.empty() || pack_aligned(t.data, t.dtype); }

// Host: how many lanes read one row of `packs` packs together (a pack each): the power of two that covers
// them, at most a warp, so a warp's lanes split into whole groups (group_sum, block_reduce.cuh).
inline int lanes_per_row(int64_t packs) {
  int width = 1;
  while (width < packs && width < 32) width *= 2;
  return width;
}

// Blocks of `threads` for a grid-stride walk over the ceil(n / kPack) packs of n elements, at most
// max_blocks (a kernel loops past that), at least one.
inline int pack_grid(int64_t n, int threads, int max_blocks = 4096) {
  const int64_t packs = (n + kPack - 1) / kPack;
  return static_cast<int>(std::clamp<int64_t>((packs + threads - 1) / threads, 1, max_blocks));
}

// A 16- or 8-byte move. On the GPU a plain vector access; on the host (emulator) memcpy, which the
// compiler turns into the same move without breaking the aliasing rules.
template <class V>
__device__ __forceinline__ V load_vector(const void* p) {
#if defined(__CUDA_ARCH__)
  return *static_cast<const V*>(p);
#else
  V v;
  std::memcpy(&v, p, sizeof v);
  return v;
#endif
}
template <class V>
__device__ __forceinline__ void store_vector(void* p, const V& v) {
#if defined(__CUDA_ARCH__)
  *static_cast<V*>(p) = v;
#else
  std::memcpy(p, &v, sizeof v);
#endif
}

// The raw codes of a pack of a 2-byte or 1-byte format (code k in the low bits first, as memory holds them).
__device__ __forceinline__ void load_codes(const uint16_t* p, uint16_t (&c)[kPack]) {
  const uint4 w = load_vector<uint4>(p);
  const uint32_t words[4] = {w.x, w.y, w.z, w.w};
  for (int k = 0; k < kPack; ++k) c[k] = static_cast<uint16_t>(words[k >> 1] >> (16 * (k & 1)));
}
__device__ __forceinline__ void load_codes(const uint8_t* p, uint8_t (&c)[kPack]) {
  const uint2 w = load_vector<uint2>(p);
  const uint32_t words[2] = {w.x, w.y};
  for (int k = 0; k < kPack; ++k) c[k] = static_cast<uint8_t>(words[k >> 2] >> (8 * (k & 3)));
}
__device__ __forceinline__ void store_codes(uint16_t* p, const uint16_t (&c)[kPack]) {
  uint32_t words[4];
  for (int w = 0; w < 4; ++w) words[w] = static_cast<uint32_t>(c[2 * w]) | (static_cast<uint32_t>(c[2 * w + 1]) << 16);
  store_vector(p, make_uint4(words[0], words[1], words[2], words[3]));
}
__device__ __forceinline__ void store_codes(uint8_t* p, const uint8_t (&c)[kPack]) {
  uint32_t words[2];
  for (int w = 0; w < 2; ++w)
    words[w] = static_cast<uint32_t>(c[4 * w]) | (static_cast<uint32_t>(c[4 * w + 1]) << 8) |
               (static_cast<uint32_t>(c[4 * w + 2]) << 16) | (static_cast<uint32_t>(c[4 * w + 3]) << 24);
  store_vector(p, make_uint2(words[0], words[1]));
}
__device__ __forceinline__ void load_codes(const float* p, float (&v)[kPack]) {
  const float4 a = load_vector<float4>(p), b = load_vector<float4>(p + 4);
  v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
}
__device__ __forceinline__ void store_codes(float* p, const float (&v)[kPack]) {
  store_vector(p, make_float4(v[0], v[1], v[2], v[3]));
  store_vector(p + 4, make_float4(v[4], v[5], v[6], v[7]));
}
__device__ __forceinline__ void load_codes(const double* p, double (&v)[kPack]) {
  for (int k = 0; k < kPack; k += 2) {
    const double2 d = load_vector<double2>(p + k);
    v[k] = d.x, v[k + 1] = d.y;
  }
}
__device__ __forceinline__ void store_codes(double* p, const double (&v)[kPack]) {
  for (int k = 0; k < kPack; k += 2) store_vector(p + k, make_double2(v[k], v[k + 1]));
}

// The exact values of the pack at i (a multiple of kPack), in W (float, or double for F64 data; an F64
// tensor read as float rounds once, as load() does).
template <class W>
__device__ __forceinline__ void load_pack(const TensorRef& t, int64_t i, W (&v)[kPack]) {
  switch (t.dtype) {
    case DType::F32: {
      float f[kPack];
      load_codes(static_cast<const float*>(t.data) + i, f);
      for (int k = 0; k < kPack; ++k) v[k] = static_cast<W>(f[k]);
      return;
    }
    case DType::F64: {
      double d[kPack];
      load_codes(static_cast<const double*>(t.data) + i, d);
      for (int k = 0; k < kPack; ++k) v[k] = static_cast<W>(d[k]);
      return;
    }
    case DType::BF16:
    case DType::F16: {
      uint16_t c[kPack];
      load_codes(static_cast<const uint16_t*>(t.data) + i, c);
      for (int k = 0; k < kPack; ++k) v[k] = static_cast<W>(t.dtype == DType::BF16 ? bf16_to_f32(c[k]) : f16_to_f32(c[k]));
      return;
    }
    case DType::E4M3:
    case DType::E5M2: {
      uint8_t c[kPack];
      load_codes(static_cast<const uint8_t*>(t.data) + i, c);
      for (int k = 0; k < kPack; ++k) v[k] = static_cast<W>(t.dtype == DType::E4M3 ? e4m3_to_f32(c[k]) : e5m2_to_f32(c[k]));
      return;
    }
    default:
      for (int k = 0; k < kPack; ++k) v[k] = static_cast<W>(f32_from_bits(0x7FFFFFFFu));
  }
}

// Elements [i, i + count) of t (count <= kPack) times scale_inv (an FP8 tensor's read_scale_inv; the
// product is one FP32 multiply, as load() takes it). Entries past count are 0.
__device__ __forceinline__ void load_values(const TensorRef& t, int64_t i, int count, bool vector, float (&v)[kPack],
                                            float scale_inv = 1.0f) {
  if (vector && count == kPack) {
    load_pack(t, i, v);
    if (is_fp8(t.dtype) && scale_inv != 1.0f)
      for (int k = 0; k < kPack; ++k) v[k] *= scale_inv;
    return;
  }
  for (int k = 0; k < kPack; ++k) v[k] = k < count ? load(t, i + k, scale_inv) : 0.0f;
}

// Elements [i, i + count) of t = v[k] * scale in t's format, as store() writes them (saturate for FP8,
// tally the statistics of an FP8 tensor with scaling state).
__device__ __forceinline__ void store_values(const TensorRef& t, int64_t i, int count, bool vector, const float (&v)[kPack],
                                             float scale = 1.0f, bool saturate = true, Fp8Tally* tally = nullptr) {
  if (!(vector && count == kPack)) {
    for (int k = 0; k < count; ++k) store(t, i + k, v[k], scale, saturate, tally);
    return;
  }
  switch (t.dtype) {
    case DType::F32: store_codes(static_cast<float*>(t.data) + i, v); return;
    case DType::F64: {
      double d[kPack];
      for (int k = 0; k < kPack; ++k) d[k] = v[k];
      store_codes(static_cast<double*>(t.data) + i, d);
      return;
    }
    case DType::BF16:
    case DType::F16: {
      uint16_t c[kPack];
      for (int k = 0; k < kPack; ++k) c[k] = t.dtype == DType::BF16 ? f32_to_bf16(v[k]) : f32_to_f16(v[k]);
      store_codes(static_cast<uint16_t*>(t.data) + i, c);
      return;
    }
    case DType::E4M3: {
      uint8_t c[kPack];
      for (int k = 0; k < kPack; ++k) c[k] = encode_counted<E4m3Format>(v[k], scale, saturate, tally);
      store_codes(static_cast<uint8_t*>(t.data) + i, c);
      return;
    }
    case DType::E5M2: {
      uint8_t c[kPack];
      for (int k = 0; k < kPack; ++k) c[k] = encode_counted<E5m2Format>(v[k], scale, saturate, tally);
      store_codes(static_cast<uint8_t*>(t.data) + i, c);
      return;
    }
    default: return;
  }
}

// The walk of an element-wise kernel over n elements: body(i, count) for each pack this thread takes,
// grid-stride (i a multiple of kPack, count = min(kPack, n - i)), so a kernel states only what it does
// to a pack.
template <class Body>
__device__ __forceinline__ void for_each_pack(int64_t n, Body&& body) {
  for (int64_t i = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) * kPack; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x * kPack)
    body(i, static_cast<int>(std::min<int64_t>(kPack, n - i)));
}

// Host: the formats the element-wise kernels read and write (F64 is the CPU's gradient-check format).
inline void check_elementwise_format(const Tensor& t, const char* op, const char* name) {
  GPT_CHECK(t.dtype == DType::F32 || is_narrow_float(t.dtype),
            "{}: {} is {}; the CUDA backend computes in FP32 and takes f32, bf16, f16, e4m3 or e5m2 (f64 is the CPU's "
            "gradient-check format)",
            op, name, dtype_name(t.dtype));
}

// The tally argument of store()/store_values() for an output: its own when it is FP8 with scaling state.
__device__ __forceinline__ Fp8Tally* tally_of(const TensorRef& t, Fp8Tally& tally) {
  return is_fp8(t.dtype) && t.scaling ? &tally : nullptr;
}

}  // namespace gpt::cuda
