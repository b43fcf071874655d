// Incremental decoding with a key/value cache: each new token runs one position through the model,
// attending over the keys and values its earlier positions left in the cache, instead of rerunning the
// whole window (O(t C) attention work per token instead of O(t^2 C), and 1-row matrix products).
//
// Written against the Backend interface and the model's parameter tensors, with the ops the model's
// forward uses; attention for the one query is per head: scores = q K^T / sqrt(hs) (matmul), softmax,
// y = p V (matmul), over a cache laid out [layer, head, position, hs] so each head's keys are one
// contiguous matrix. FP32 weights only (the model's recipe must be fp32); no dropout.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/arena.h"
#include "model/gpt.h"

namespace gpt {

class KvCacheDecoder {
 public:
  explicit KvCacheDecoder(GPT& model);

  // Positions cached so far; at most capacity() (model.context_length).
  int length() const { return length_; }
  int capacity() const { return capacity_; }
  void reset() { length_ = 0; }

  // Runs token at position length() and caches its keys and values; returns the logits for the next
  // token (vocab_size of them), valid until the next call.
  std::span<const float> append(int32_t token);

 private:
  GPT& model_;
  Backend& backend_;
  int capacity_;
  int length_ = 0;
  Arena arena_;
  std::vector<float> logits_;
};

}  // namespace gpt
