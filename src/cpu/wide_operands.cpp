#include "cpu/wide_operands.h"

#include "cpu/convert.h"
#include "cpu/dispatch.h"

#include <algorithm>

namespace gpt::cpu {

void* StagingPool::get(size_t slot, size_t bytes) {
  if (buffers_.size() <= slot) buffers_.resize(slot + 1);
  Buffer& b = buffers_[slot];
  if (b.bytes < bytes) {
    const auto align = static_cast<size_t>(kAlign);
    b.bytes = (bytes + align - 1) / align * align;
    b.storage.reset(static_cast<std::byte*>(::operator new[](b.bytes, kAlign)));
  }
  return b.storage.get();
}

size_t StagingPool::bytes() const {
  size_t total = 0;
  for (const Buffer& b : buffers_) total += b.bytes;
  return total;
}

WideOperands::WideOperands(StagingPool& pool, std::initializer_list<const Tensor*> tensors) : pool_(pool) {
  const Tensor* first_wide = nullptr;
  for (const Tensor* t : tensors) {
    if (t->empty() || !is_wide_float(t->dtype)) continue;
    if (!first_wide) first_wide = t;
    GPT_CHECK(t->dtype == first_wide->dtype, "mixed dtypes in one op: {} and {}", dtype_name(first_wide->dtype),
              dtype_name(t->dtype));
  }
  if (first_wide) wide_ = first_wide->dtype;
}

WideOperands::Staged* WideOperands::find(const Tensor& t) {
  for (int i = 0; i < count_; ++i)
    if (staged_[i].original.data == t.data) return &staged_[i];
  return nullptr;
}

Tensor WideOperands::stage(const Tensor& t, bool decode_values, bool apply_scale, bool output) {
  GPT_CHECK(count_ < static_cast<int>(std::size(staged_)), "an op with more than {} narrow operands",
            std::size(staged_));
  Staged& s = staged_[count_];
  s.original = t;
  s.output = output;
  s.wide = t;
  s.wide.dtype = wide_;
  s.wide.scaling = nullptr;
  s.wide.data = pool_.get(static_cast<size_t>(count_), static_cast<size_t>(t.numel()) * dtype_size(wide_));
  ++count_;
  if (decode_values) {
    const float scale_inv = apply_scale && t.scaling ? t.scaling->scale_inv : 1.0f;
    dispatch_float(wide_, [&]<class T>(T) { decode<T>(t, s.wide.as<T>(), t.numel(), static_cast<T>(scale_inv)); });
  }
  return s.wide;
}

Tensor WideOperands::in(const Tensor& t, bool apply_scale) {
  if (t.empty() || is_wide_float(t.dtype)) return t;
  GPT_CHECK(is_narrow_float(t.dtype), "expected a floating-point tensor, got {}", dtype_name(t.dtype));
  if (Staged* s = find(t)) return s->wide;
  return stage(t, true, apply_scale, false);
}

Tensor WideOperands::out(const Tensor& t, bool accumulate) {
  if (t.empty() || is_wide_float(t.dtype)) return t;
  GPT_CHECK(is_narrow_float(t.dtype), "expected a floating-point tensor, got {}", dtype_name(t.dtype));
  if (Staged* s = find(t)) {
    GPT_CHECK(s->original.dtype == t.dtype && s->original.numel() == t.numel(),
              "an output aliasing an input must have its dtype and size");
    s->output = true;
    return s->wide;
  }
  return stage(t, accumulate, true, true);
}

void WideOperands::store() {
  for (int i = 0; i < count_; ++i) {
    const Staged& s = staged_[i];
    if (!s.output) continue;
    Fp8Meta* meta = s.original.scaling;
    const float scale = meta ? meta->scale : 1.0f;
    QuantStats stats;
    dispatch_float(wide_, [&]<class T>(T) {
      stats = encode<T>(s.wide.as<T>(), s.original, s.original.numel(), static_cast<T>(scale), true);
    });
    if (meta) add_stats(*meta, stats);
  }
  count_ = 0;
}

}  // namespace gpt::cpu
