// oneDNN's matmul for the narrow products of CPUs that multiply BF16 natively (AVX512-BF16, AMX): BF16
// operands with FP32 accumulation, read in place; E4M3/E5M2 operands decoded to BF16 (exact: their values
// are BF16 values) into the planned workspace first. out = alpha op(a) op(b) + beta out + bias: with
// alpha 1, one primitive, beta as a sum post-op, the bias as a binary-add post-op after it, the output
// written by oneDNN (F32, or BF16 rounded to nearest even once). alpha carries the FP8 inverse scales,
// which change every step, so it would be a runtime output scale, and oneDNN 2.6 takes one only on its
// gemm:jit kernels (its brgemm ones, AMX's and AVX512-BF16's, refuse it): on the AMX machine those made
// the demo's fp8 step cost twice the CPU time of its bf16 step. So a scaled product runs unscaled on
// brgemm into an FP32 accumulator in the workspace, and one pass applies alpha, beta and the bias in
// oneDNN's order and stores the output. Other output formats take the FP32 path. oneDNN's scratchpad is given from the workspace
// too (user scratchpad mode), so it is planned.
// The CPU backend takes this path wherever the CPU multiplies BF16 natively, unless
// precision.cpu_narrow_matmul is exact (then the FP32 engine of narrow_matmul.h, the exact emulation).
//
// Primitives are created once per shape, leading dimensions, formats and beta, and cached. A shape for
// which oneDNN offers only its reference implementation is remembered as such and takes the FP32 path.
// oneDNN orders the FP32 accumulation its own way (blocked over k, in its vector lanes), so its results
// differ from OpenBLAS's in the last bits of the FP32 accumulator (measured in tests/cpu/test_narrow_matmul.cpp
// and tests/train/test_precision_baseline.cpp where oneDNN runs); AVX512-BF16's dot product also treats
// subnormal BF16 operands (below 2^-126) as zero.
#pragma once

#include "backend/op_args.h"
#include "cpu/narrow_matmul.h"

#include <memory>
#include <string>
#include <vector>

namespace gpt::cpu {

// What oneDNN offers this CPU: its effective ISA, and whether its BF16 products run natively.
struct OnednnInfo {
  std::string version;  // "2.6.3"
  std::string isa;      // "avx2", "avx512_core_bf16", "avx512_core_amx", ...
  bool native_bf16 = false;
};
OnednnInfo onednn_info();

// The narrow products' engine on this CPU, in words, for `gpt-train bench` and `info`; exact:
// precision.cpu_narrow_matmul is exact.
std::string narrow_matmul_description(bool exact);
// The implementations oneDNN chose for the products run so far in this process ("brg:avx512_core_amx",
// ...), each once.
std::vector<std::string> onednn_kernels_used();

// One oneDNN operand or result: dense row-major with leading dimension ld, read transposed when trans.
struct OnednnOperand {
  const void* data = nullptr;
  DType dtype = DType::BF16;
  bool trans = false;
  int64_t ld = 0;
};

class OnednnMatmul {
 public:
  OnednnMatmul();
  ~OnednnMatmul();
  OnednnMatmul(const OnednnMatmul&) = delete;
  OnednnMatmul& operator=(const OnednnMatmul&) = delete;

  // Runs the product through oneDNN when a and b are BF16 or FP8, out
  // is F32 or BF16 and the FP8 copies and the scratchpad fit the workspace; returns false otherwise (the
  // caller takes the FP32 path).
  bool try_run(const MatmulArgs& args, const GemmShape2D& shape, MatmulWorkspace& workspace);

  // The product itself, for operands already in a format oneDNN takes (F32 or BF16 a and b; F32 or BF16
  // out with row length n; bias F32 or BF16 or empty). Returns false when oneDNN has only its reference
  // implementation for it, or its scratchpad (and, scaled, the FP32 accumulator) does not fit in
  // [scratch, scratch + scratch_bytes). Tests call it with F32 operands, which every CPU has, to check the
  // epilogue and the strides.
  bool run(int64_t m, int64_t n, int64_t k, const OnednnOperand& a, const OnednnOperand& b, void* out, DType out_dtype,
           const Tensor& bias, float alpha, float beta, void* scratch, size_t scratch_bytes);

 private:
  // The cached primitive for this product (created on first use), or null when oneDNN has only its
  // reference implementation or the scratchpad would exceed scratch_bytes. Points into the cache.
  const void* primitive_for(int64_t m, int64_t n, int64_t k, const OnednnOperand& a, const OnednnOperand& b, DType out_dtype,
                            const Tensor& bias, float beta, size_t scratch_bytes);
  // The primitive run() executes for this product: alpha 1, the product's own; otherwise the unscaled one
  // into an FP32 accumulator, which takes the first bytes of the scratch.
  const void* primitive_for_product(int64_t m, int64_t n, int64_t k, const OnednnOperand& a, const OnednnOperand& b,
                                    DType out_dtype, const Tensor& bias, float alpha, float beta, size_t scratch_bytes);
  void execute(const void* primitive, const OnednnOperand& a, const OnednnOperand& b, void* out, const Tensor& bias, float beta,
               void* scratch);

  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace gpt::cpu
