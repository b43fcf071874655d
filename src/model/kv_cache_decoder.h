// Incremental decoding with a key/value cache: each new token runs one position through the model,
// attending over the keys and values its earlier positions left in the cache, instead of rerunning the
// whole window (O(t C) attention work per token instead of O(t^2 C), and 1-row matrix products).
//
// Written against the Backend interface and the model's compute weights, with the ops the model's forward
// uses (each residual add fused with the LayerNorm after it, as there); the one query's attention is one
// op for every head (Backend::attention_decode: it writes the position's keys and values into the cache and
// attends over it), with the cache laid out [layer, head, position, hs] so each head's keys are one
// contiguous matrix. No dropout.
//
// Every recipe: each tensor takes the format the model's precision layout gives it (the residual stream,
// qkv, the cache and the logits in the compute format; LayerNorm statistics, scores and probabilities in
// FP32; an FP8 block's linear inputs in E4M3 through the model's scaling slots, produced in a wider
// source and cast as the model's forward produces them). The cache holds qkv's own values, so caching
// rounds nothing the full forward does not. Under fp8 current scaling each position's inputs are scaled by
// their own amax, where the full forward scales a window by the amax of all its rows: the two differ by
// FP8 rounding, not more. The FP8 statistics these stores record are discarded when the decoder goes, as
// an evaluation's are. Under LoRA each adapted product adds its adapter's term after the base product, as
// the forward does, so a LoRA run samples with the cache the weights it is training.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/arena.h"
#include "model/gpt.h"

namespace gpt {

class KvCacheDecoder {
 public:
  // Decodes with the model's weights as they are now (a later change to the masters is not seen). The
  // model's own forward must not run while a decoder is in use: it leaves the FP8 weight scales as the
  // scaling table has them, which under current scaling are not those the decoder's weights were cast with.
  explicit KvCacheDecoder(GPT& model);
  ~KvCacheDecoder();
  KvCacheDecoder(const KvCacheDecoder&) = delete;
  KvCacheDecoder& operator=(const KvCacheDecoder&) = delete;

  // Whether the model's backend runs the decoder's products in the model's recipe: FP32 everywhere, the
  // narrow recipes where the backend multiplies any operand formats (BackendCapabilities).
  static bool supports(GPT& model);

  // Positions cached so far; at most capacity() (model.context_length).
  int length() const { return length_; }
  int capacity() const { return capacity_; }
  void reset() { length_ = 0; }

  // Runs token at position length() and caches its keys and values; returns the logits for the next
  // token (vocab_size of them), valid until the next call.
  std::span<const float> append(int32_t token);

 private:
  // A buffer of the arena seen with dims in format f (the buffers are sized for FP32, the widest).
  Tensor view(const char* buffer, std::initializer_list<int64_t> dims, TensorFormat f);
  // Runs op into dst, or, where block l's tensor t is produced in a wider source format than dst's FP8
  // format, into the staging buffer in that format and then casts it into dst (GPT::produce's rule).
  template <class Op>
  void produce(int l, BlockTensor t, const Tensor& dst, Op&& op);

  GPT& model_;
  Backend& backend_;
  const PrecisionLayout& layout_;
  int capacity_;
  int length_ = 0;
  Arena arena_;
  std::vector<std::byte> logits_raw_;
  std::vector<float> logits_;
};

}  // namespace gpt
