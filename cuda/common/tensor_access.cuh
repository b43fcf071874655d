// How a kernel reads and writes a tensor of any storage format. A kernel takes TensorRef arguments (data,
// format, FP8 scaling state) instead of typed pointers, and computes in FP32:
//   load(t, i, scale_inv)   the exact value of element i, times scale_inv (an FP8 tensor's scale_inv)
//   store(t, i, x, scale, ..)   element i = the one round-to-nearest-even conversion of x * scale
// The conversions are precision/float_formats.h's, the same functions the CPU backend encodes with, so
// both backends store the same codes for the same FP32 value. The switch on the format is uniform
// across a launch (every thread takes the same branch), so it costs no divergence.
//
// FP8 statistics follow cpu/convert.h's encode_one: a nonzero x stored as +-0 is an underflow; a scaled
// magnitude rounding above the format's max (inf included, NaN excluded) is saturated (stored as +-max
// when saturating, else inf/NaN); amax is max |x| of the unscaled values, NaN once any is NaN. A thread
// tallies its elements in an Fp8Tally and the block adds them to the tensor's Fp8Meta once
// (flush_fp8_tally): amax through an integer atomicMax on the bits of a non-negative float, which orders
// them as the values are ordered (and puts a NaN with a clear sign bit above +inf), so the result does
// not depend on the order blocks finish in.
#pragma once

#include "common/cuda_api.h"
#include "core/tensor.h"
#include "precision/float_formats.h"

#include <cmath>
#include <cstdint>

namespace gpt::cuda {

struct TensorRef {
  void* data = nullptr;
  DType dtype = DType::F32;
  Fp8Meta* scaling = nullptr;  // FP8 only; null: scale 1, no statistics
};

inline TensorRef tensor_ref(const Tensor& t) { return {t.data, t.dtype, t.scaling}; }

GPT_HOST_DEVICE bool is_fp8(DType t) { return t == DType::E4M3 || t == DType::E5M2; }

// The factor an FP8 tensor's codes are multiplied by when read, and the one values are multiplied by
// when stored: 1 for every other format, and for FP8 tensors without scaling state.
__device__ __forceinline__ float read_scale_inv(const TensorRef& t) {
  return is_fp8(t.dtype) && t.scaling ? t.scaling->scale_inv : 1.0f;
}
__device__ __forceinline__ float write_scale(const TensorRef& t) {
  return is_fp8(t.dtype) && t.scaling ? t.scaling->scale : 1.0f;
}

__device__ __forceinline__ float load(const TensorRef& t, int64_t i, float scale_inv = 1.0f) {
  switch (t.dtype) {
    case DType::F32: return static_cast<const float*>(t.data)[i];
    case DType::F64: return static_cast<float>(static_cast<const double*>(t.data)[i]);
    case DType::BF16: return bf16_to_f32(static_cast<const uint16_t*>(t.data)[i]);
    case DType::F16: return f16_to_f32(static_cast<const uint16_t*>(t.data)[i]);
    case DType::E4M3: return e4m3_to_f32(static_cast<const uint8_t*>(t.data)[i]) * scale_inv;
    case DType::E5M2: return e5m2_to_f32(static_cast<const uint8_t*>(t.data)[i]) * scale_inv;
    default: return f32_from_bits(0x7FFFFFFFu);
  }
}

// A thread's FP8 statistics, added to the tensor's scaling state by flush_fp8_tally.
struct Fp8Tally {
  float amax = 0.0f;  // NaN once a NaN was stored
  int underflows = 0;
  int saturated = 0;
};

template <class Fmt>
__device__ __forceinline__ typename Fmt::Storage encode_counted(float x, float scale, bool saturate, Fp8Tally* tally) {
  using Storage = typename Fmt::Storage;
  const float v = x * scale;
  Storage code = Fmt::encode(v, false);
  const auto magnitude = static_cast<Storage>(code & ~Fmt::kSignMask);
  if (magnitude == Fmt::kMaxCode + 1 && !(v != v)) {
    if (tally) ++tally->saturated;
    if (saturate) code = static_cast<Storage>((code & Fmt::kSignMask) | Fmt::kMaxCode);
  } else if (magnitude == 0 && x != 0.0f && tally) {
    ++tally->underflows;
  }
  if (tally) tally->amax = (x != x || tally->amax != tally->amax) ? f32_from_bits(0x7FFFFFFFu) : fmaxf(tally->amax, fabsf(x));
  return code;
}

// Element i = x * scale in t's format. saturate applies to FP8 (BF16 and F16 overflow to inf, as IEEE);
// scale must be 1 for the wide formats. tally (FP8 with scaling state) gathers the statistics.
__device__ __forceinline__ void store(const TensorRef& t, int64_t i, float x, float scale = 1.0f, bool saturate = true,
                                      Fp8Tally* tally = nullptr) {
  switch (t.dtype) {
    case DType::F32: static_cast<float*>(t.data)[i] = x; return;
    case DType::F64: static_cast<double*>(t.data)[i] = x; return;
    case DType::BF16: static_cast<uint16_t*>(t.data)[i] = f32_to_bf16(x); return;
    case DType::F16: static_cast<uint16_t*>(t.data)[i] = f32_to_f16(x); return;
    case DType::E4M3: static_cast<uint8_t*>(t.data)[i] = encode_counted<E4m3Format>(x, scale, saturate, tally); return;
    case DType::E5M2: static_cast<uint8_t*>(t.data)[i] = encode_counted<E5m2Format>(x, scale, saturate, tally); return;
    default: return;
  }
}

// Adds the block's tallies to meta: every thread of the (one-dimensional, whole-warp) block calls it.
// The amax bits of a non-negative float order like the value; NaN is stored as 0x7FFFFFFF, above +inf.
__device__ __forceinline__ void flush_fp8_tally(Fp8Meta* meta, const Fp8Tally& tally) {
  if (!meta) return;
  const int amax_bits = tally.amax != tally.amax ? 0x7FFFFFFF : static_cast<int>(f32_bits(tally.amax));
  if (amax_bits > 0) atomicMax(reinterpret_cast<int*>(&meta->amax), amax_bits);
  if (tally.underflows) atomicAdd(&meta->underflows, tally.underflows);
  if (tally.saturated) atomicAdd(&meta->saturated, tally.saturated);
}

}  // namespace gpt::cuda
