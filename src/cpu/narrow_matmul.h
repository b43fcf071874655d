// Matrix products with narrow (BF16, F16, E4M3, E5M2) operands on the CPU, in FP32 with FP32 accumulation,
// through one planned workspace instead of staging the whole operands.
//
// Two engines:
//  - oneDNN's BF16 matmul (onednn_matmul.h) where the CPU multiplies BF16 natively (AVX512-BF16, AMX):
//    BF16 operands are read in place, FP8 ones are decoded to BF16 (exact) into the workspace first.
//  - everywhere else, and for F16 (oneDNN 2.6 has no F16 matmul on CPUs): the narrow operands are decoded
//    to FP32 (exact) into the workspace and OpenBLAS's sgemm multiplies them, so the arithmetic is that
//    of the exact emulation: one sgemm over the decoded operands, rounded once on store. A product whose
//    decoded operands do not fit the workspace is tiled (see choose_tiles in narrow_matmul.cpp): blocks of
//    output columns or rows, or chunks of the inner dimension accumulated with beta = 1. Tiling changes
//    which sgemm calls compute an element, so its FP32 result may differ from the untiled one in the last
//    bits (OpenBLAS's kernels round differently at tile edges); the narrow output's rounding hides most
//    of that.
#pragma once

#include "backend/op_args.h"

#include <cstddef>
#include <memory>
#include <new>

namespace gpt::cpu {

class OnednnMatmul;

// The narrow products' working memory: one buffer of fixed capacity, allocated on the first narrow product
// and held from then on. Its capacity is what the backend tells the planner
// (BackendCapabilities::narrow_matmul_workspace_bytes), so a narrow run's ledger counts it up front.
class MatmulWorkspace {
 public:
  explicit MatmulWorkspace(size_t capacity_bytes);
  size_t capacity_bytes() const { return capacity_; }
  // Bytes allocated: 0 until the first narrow product, then the capacity.
  size_t held_bytes() const { return storage_ ? capacity_ : 0; }
  // The buffer, allocated on first use; 64-byte aligned.
  void* data();

 private:
  static constexpr std::align_val_t kAlign{64};
  struct AlignedDelete {
    void operator()(std::byte* p) const { ::operator delete[](p, kAlign); }
  };
  size_t capacity_;
  std::unique_ptr<std::byte[], AlignedDelete> storage_;
};

// op(a)[m,k] op(b)[k,n] as the BLAS sees them: a's and b's row lengths are their leading dimensions.
struct GemmShape2D {
  int64_t m, n, k;
  int64_t lda, ldb;
};

// How a product was tiled, for tests and the benchmark's report.
struct NarrowTiles {
  int64_t m = 0, n = 0, k = 0;     // the product
  int64_t mb = 0, nb = 0, kb = 0;  // its tiles
  bool whole() const { return mb == m && nb == n && kb == k; }
};

// The tiles the FP32 path would use for a product with these operand formats in a workspace of
// `capacity_floats` FP32 values.
NarrowTiles choose_tiles(const MatmulArgs& args, const GemmShape2D& shape, int64_t capacity_floats);

// out = alpha op(a) op(b) + beta out + bias with at least one narrow tensor and every wide one F32. alpha
// already carries the FP8 operands' inverse scales (their codes enter unscaled). onednn may be null (no
// oneDNN engine); it is used only where it multiplies natively.
void narrow_matmul(const MatmulArgs& args, const GemmShape2D& shape, MatmulWorkspace& workspace, OnednnMatmul* onednn);

}  // namespace gpt::cpu
