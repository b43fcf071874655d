// One new position's attention over a KV cache, every head (AttentionDecodeArgs, op_args.h): the CUDA
// backend's kernel for the KV-cache decoder (the math and layout are in attention_decode.cu).
#pragma once

#include "backend/op_args.h"
#include "common/device_context.h"

#include <cstddef>
#include <cstdint>

namespace gpt::cuda {

// FlashDecoding's split of a head's positions: chunks of about kDecodeChunkLength, at most
// kMaxDecodeChunks of them (longer chunks past that), and no more than the partial results that fit in
// scratch_bytes (the backend's scratch); one chunk for a short cache. A function of the shape alone, so
// the sums' order does not depend on the device.
constexpr int64_t kDecodeChunkLength = 128;
constexpr int64_t kMaxDecodeChunks = 64;
struct DecodeChunks {
  int64_t chunks;
  int64_t length;  // positions per chunk (the last may have fewer)
};
DecodeChunks attention_decode_chunks(int64_t heads, int64_t head_size, int64_t length, size_t scratch_bytes);

void attention_decode(const AttentionDecodeArgs& args, const DeviceContext& ctx);

}  // namespace gpt::cuda
