// Rows read and written eight elements at a time, in any storage format, for the row kernels
// (layernorm, softmax, cross-entropy, embedding). A chunk is elements [i, i+8) of a tensor; a thread
// holds it as float[8].
//   - vector path: when the row length is a multiple of 8 and the tensor's base pointer is aligned to
//     min(16, 8 * element size) bytes (chunk_aligned, checked once on the host), a chunk is one 128-bit
//     access for BF16/F16 (uint4), two for F32 (float4), one 64-bit access for FP8 (uint2);
//   - scalar path otherwise, and for the partial chunk at the end of a row: element by element through
//     tensor_access.cuh's load/store, the missing elements read as 0 and never written.
// The values and rounding are tensor_access.cuh's, so both paths give the same bits.
#pragma once

#include "common/tensor_access.cuh"

#include <cstdint>
#include <initializer_list>

namespace gpt::cuda {

constexpr int kChunk = 8;

// Host side: the row kernels compute in FP32 and store F32, BF16, F16, E4M3 and E5M2; F64 is the CPU
// backend's format for double-precision gradient checks and has no kernels here.
inline void check_row_formats(const char* op, std::initializer_list<const Tensor*> tensors) {
  for (const Tensor* t : tensors) {
    GPT_CHECK(t->empty() || t->dtype == DType::F32 || is_narrow_float(t->dtype),
              "{}: the cuda backend computes in FP32 and stores f32, bf16, f16, e4m3 or e5m2, not {} (f64 is for "
              "the cpu backend's gradient checks)",
              op, dtype_name(t->dtype));
  }
}

// Host side: may the rows of t, each row_length elements long, be accessed in whole vector chunks?
inline bool chunk_aligned(const Tensor& t, int64_t row_length) {
  if (t.empty()) return true;
  const size_t element = dtype_size(t.dtype);
  const size_t alignment = element * kChunk < 16 ? element * kChunk : 16;
  return row_length % kChunk == 0 && reinterpret_cast<uintptr_t>(t.data) % alignment == 0;
}

// Host side: threads for a block that owns one row of row_length elements, a chunk a thread at a time:
// whole warps, as many as the row has chunks, at most max_threads.
inline int row_block_threads(int64_t row_length, int max_threads) {
  const int64_t chunks = (row_length + kChunk - 1) / kChunk;
  const int64_t warps = (chunks + 31) / 32;
  return static_cast<int>(warps * 32 < max_threads ? warps * 32 : max_threads);
}

// How many of chunk j's elements lie in a row of row_length.
__device__ __forceinline__ int chunk_elements(int64_t row_length, int64_t j) {
  const int64_t left = row_length - j * kChunk;
  return left < kChunk ? static_cast<int>(left) : kChunk;
}

__device__ __forceinline__ void unpack_pairs16(const uint4& u, DType dtype, float (&v)[kChunk]) {
  const uint32_t words[4] = {u.x, u.y, u.z, u.w};
  for (int k = 0; k < 4; ++k) {
    const auto lo = static_cast<uint16_t>(words[k] & 0xFFFFu), hi = static_cast<uint16_t>(words[k] >> 16);
    v[2 * k] = dtype == DType::BF16 ? bf16_to_f32(lo) : f16_to_f32(lo);
    v[2 * k + 1] = dtype == DType::BF16 ? bf16_to_f32(hi) : f16_to_f32(hi);
  }
}

// v = elements [i, i + n) of t times scale_inv (FP8), 0 past n. vector: t is chunk_aligned, i % 8 == 0.
__device__ __forceinline__ void load_chunk(const TensorRef& t, int64_t i, int n, bool vector, float (&v)[kChunk],
                                           float scale_inv = 1.0f) {
  if (vector && n == kChunk) {
    switch (t.dtype) {
      case DType::F32: {
        const float4 a = reinterpret_cast<const float4*>(t.data)[i / 4];
        const float4 b = reinterpret_cast<const float4*>(t.data)[i / 4 + 1];
        v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
        return;
      }
      case DType::BF16:
      case DType::F16: unpack_pairs16(reinterpret_cast<const uint4*>(t.data)[i / kChunk], t.dtype, v); return;
      case DType::E4M3:
      case DType::E5M2: {
        const uint2 u = reinterpret_cast<const uint2*>(t.data)[i / kChunk];
        for (int k = 0; k < kChunk; ++k) {
          const auto code = static_cast<uint8_t>(((k < 4 ? u.x : u.y) >> (8 * (k % 4))) & 0xFFu);
          v[k] = (t.dtype == DType::E4M3 ? e4m3_to_f32(code) : e5m2_to_f32(code)) * scale_inv;
        }
        return;
      }
      default: break;
    }
  }
  for (int k = 0; k < kChunk; ++k) v[k] = k < n ? load(t, i + k, scale_inv) : 0.0f;
}

__device__ __forceinline__ uint32_t pack_pair16(DType dtype, float lo, float hi) {
  const uint32_t a = dtype == DType::BF16 ? f32_to_bf16(lo) : f32_to_f16(lo);
  const uint32_t b = dtype == DType::BF16 ? f32_to_bf16(hi) : f32_to_f16(hi);
  return a | (b << 16);
}

// Elements [i, i + n) of t = v[k] * scale in t's format (FP8: saturating, with tally's statistics).
__device__ __forceinline__ void store_chunk(const TensorRef& t, int64_t i, int n, bool vector, const float (&v)[kChunk],
                                            float scale = 1.0f, Fp8Tally* tally = nullptr) {
  if (vector && n == kChunk) {
    switch (t.dtype) {
      case DType::F32:
        reinterpret_cast<float4*>(t.data)[i / 4] = make_float4(v[0], v[1], v[2], v[3]);
        reinterpret_cast<float4*>(t.data)[i / 4 + 1] = make_float4(v[4], v[5], v[6], v[7]);
        return;
      case DType::BF16:
      case DType::F16:
        reinterpret_cast<uint4*>(t.data)[i / kChunk] = make_uint4(
            pack_pair16(t.dtype, v[0], v[1]), pack_pair16(t.dtype, v[2], v[3]), pack_pair16(t.dtype, v[4], v[5]),
            pack_pair16(t.dtype, v[6], v[7]));
        return;
      case DType::E4M3:
      case DType::E5M2: {
        uint32_t words[2] = {0, 0};
        for (int k = 0; k < kChunk; ++k) {
          const uint32_t code = t.dtype == DType::E4M3 ? encode_counted<E4m3Format>(v[k], scale, true, tally)
                                                       : encode_counted<E5m2Format>(v[k], scale, true, tally);
          words[k / 4] |= code << (8 * (k % 4));
        }
        reinterpret_cast<uint2*>(t.data)[i / kChunk] = make_uint2(words[0], words[1]);
        return;
      }
      default: break;
    }
  }
  for (int k = 0; k < n; ++k) store(t, i + k, v[k], scale, true, tally);
}

}  // namespace gpt::cuda
