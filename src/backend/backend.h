// The Backend interface: one method per op, each taking its argument struct. The model, trainer and
// optimizer are written once against this class; the CPU backend (src/cpu) and the CUDA backend
// (cuda/) implement it. Nothing above this interface asks which backend it runs on.
#pragma once

#include "backend/op_args.h"

#include <cstddef>
#include <memory>
#include <string>

namespace gpt {

class Backend {
 public:
  virtual ~Backend() = default;

  virtual std::string name() const = 0;
  virtual Device device() const = 0;
  // Whether attention_forward materialises the [B,NH,T,T] probabilities for backward. A fused
  // (flash-style) attention keeps only O(T) statistics, and the memory planner must not count scores.
  virtual bool attention_keeps_probs() const { return true; }

  // Memory: the arenas are the only callers of allocate/deallocate.
  virtual void* allocate(size_t bytes) = 0;
  virtual void deallocate(void* ptr) = 0;
  virtual void copy_to_device(void* dst, const void* host_src, size_t bytes) = 0;
  virtual void copy_to_host(void* host_dst, const void* src, size_t bytes) = 0;
  virtual void synchronize() = 0;

  virtual void fill(const FillArgs& args) = 0;
  virtual void copy(const CopyArgs& args) = 0;
  virtual void matmul(const MatmulArgs& args) = 0;
  virtual void bias_backward(const BiasBackwardArgs& args) = 0;
  virtual void layernorm_forward(const LayerNormForwardArgs& args) = 0;
  virtual void layernorm_backward(const LayerNormBackwardArgs& args) = 0;
  virtual void attention_forward(const AttentionForwardArgs& args) = 0;
  virtual void attention_backward(const AttentionBackwardArgs& args) = 0;
  virtual void softmax_forward(const SoftmaxForwardArgs& args) = 0;
  virtual void softmax_backward(const SoftmaxBackwardArgs& args) = 0;
  virtual void gelu_forward(const GeluForwardArgs& args) = 0;
  virtual void gelu_backward(const GeluBackwardArgs& args) = 0;
  virtual void residual_forward(const ResidualForwardArgs& args) = 0;
  virtual void residual_backward(const ResidualBackwardArgs& args) = 0;
  virtual void embedding_forward(const EmbeddingForwardArgs& args) = 0;
  virtual void embedding_backward(const EmbeddingBackwardArgs& args) = 0;
  virtual void cross_entropy(const CrossEntropyArgs& args) = 0;
  virtual void adamw_update(const AdamWArgs& args) = 0;
  virtual void sum_of_squares(const SumOfSquaresArgs& args) = 0;
  // Mixed precision: conversion and FP8 quantisation (src/cpu/cast.cpp).
  virtual void cast(const CastArgs& args) = 0;
  virtual void amax(const AmaxArgs& args) = 0;
  virtual void quantize_roundtrip(const QuantizeRoundtripArgs& args) = 0;
};

enum class BackendKind { Auto, Cpu, Cuda };

// "auto" picks CUDA when this build has it and a device is present, else the CPU.
// threads <= 0 lets OpenMP decide.
std::unique_ptr<Backend> make_backend(BackendKind kind, int threads = 0);
BackendKind parse_backend_kind(const std::string& name);

}  // namespace gpt
