// The CPU kernels compute in F32 (F64 for the gradient checks). An op whose tensors are stored in a
// narrow format (BF16, F16, E4M3, E5M2) sees them through WideOperands: each narrow input decoded into a
// staging buffer (an FP8 one times its scale_inv, unless the op applies that itself), each narrow output
// computed in a staging buffer and encoded into its format when the op is done (FP8: with its scale,
// saturating, adding to its amax and counts). Decoding is exact and the store is the value's one rounding,
// so a narrow op gives exactly the wide op's result rounded to the output's format: what a GPU kernel
// with FP32 math and one conversion on store gives, and what the FP32-storage emulation gave before.
// An output that aliases an input shares its staging buffer. Wide tensors pass through untouched.
//
// The staging buffers belong to the backend and grow to the largest op once; later steps reuse them,
// so a step allocates nothing after the first. They are CPU-only working memory: a GPU kernel reads and
// writes the narrow tensors directly.
#pragma once

#include "core/tensor.h"

#include <cstddef>
#include <initializer_list>
#include <memory>
#include <new>
#include <vector>

namespace gpt::cpu {

class StagingPool {
 public:
  // A buffer of at least `bytes`, 64-byte aligned, valid until slot is asked for again.
  void* get(size_t slot, size_t bytes);
  size_t bytes() const;

 private:
  static constexpr std::align_val_t kAlign{64};
  // Storage from the aligned operator new[] must go back through the aligned operator delete[].
  struct AlignedDelete {
    void operator()(std::byte* p) const { ::operator delete[](p, kAlign); }
  };
  struct Buffer {
    std::unique_ptr<std::byte[], AlignedDelete> storage;
    size_t bytes = 0;
  };
  std::vector<Buffer> buffers_;
};

class WideOperands {
 public:
  // The kernel's dtype: F64 when any of `tensors` is F64, else F32 (every wide tensor must be that one).
  WideOperands(StagingPool& pool, std::initializer_list<const Tensor*> tensors);
  WideOperands(const WideOperands&) = delete;
  WideOperands& operator=(const WideOperands&) = delete;

  DType wide() const { return wide_; }
  // t as the kernel reads it. apply_scale false leaves an FP8 tensor's codes unscaled (the matrix product
  // applies scale_inv to its accumulator).
  Tensor in(const Tensor& t, bool apply_scale = true);
  // t as the kernel writes it. accumulate: the op adds to t (+=), so the staging starts from its values.
  Tensor out(const Tensor& t, bool accumulate = false);
  // Encodes every staged output into its tensor; call once the kernel is done.
  void store();

 private:
  struct Staged {
    Tensor original;
    Tensor wide;
    bool output = false;
  };
  Staged* find(const Tensor& t);
  Tensor stage(const Tensor& t, bool decode, bool apply_scale, bool output);

  StagingPool& pool_;
  DType wide_ = DType::F32;
  Staged staged_[8];
  int count_ = 0;
};

}  // namespace gpt::cpu
