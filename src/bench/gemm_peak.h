// The matrix-product peak that model FLOPs utilisation is measured against: the FP32 rate cblas_sgemm
// (the BLAS the CPU backend runs on) reaches at the model's own GEMM shapes and thread count, measured
// on the spot, so MFU says how close a step comes to what this machine's BLAS can do for this model,
// not to a datasheet number.
//
// The shapes are the ones GPT issues, per micro-batch of BT = B x T rows, for a linear layer with weight
// W [OC, IC] (qkv: 3C x C, attention projection: C x C, fc: 4C x C, fc projection: C x 4C, each L times;
// the LM head: Vp x C, tied to the token embedding, once):
//   forward   out [BT, OC] = x [BT, IC] W^T          m = BT, n = OC, k = IC, b transposed
//   backward  dx [BT, IC]  = dout [BT, OC] W          m = BT, n = IC, k = OC
//             dW [OC, IC] += dout^T x                 m = OC, n = IC, k = BT, a transposed, beta = 1
// Under LoRA the frozen weights have no dW, and each adapted layer adds its adapters' products
// (model/lora.cpp; h [BT, r], A [r, IC], B [OC, r]):
//   forward   "h"   h = x A^T (m = BT, n = r, k = IC);  "out"  out += s h B^T (m = BT, n = OC, k = r)
//   backward  "h" again;  "dB"  dB += s dout^T h (m = OC, n = r, k = BT);  "dh"  dh = s dout B (m = BT,
//             n = r, k = OC);  "dA"  dA += dh^T x (m = r, n = IC, k = BT);  "dx"  dx += dh A (m = BT, n = IC, k = r)
// The overall peak weights each shape by its FLOPs in a step: total FLOPs / the time they would take
// at each shape's measured rate.
#pragma once

#include "config/config.h"
#include "layout/lora_layout.h"

#include <cstdint>
#include <string>
#include <vector>

namespace gpt::bench {

struct GemmShape {
  std::string name;  // "qkv forward", "lm head backward dW", ...; shapes that coincide are merged, names joined
  int64_t m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false;
  float beta = 0.0f;
  int64_t per_step = 0;  // calls per optimizer step
  double flops() const { return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k); }
  bool same_gemm(const GemmShape& o) const {
    return m == o.m && n == o.n && k == o.k && trans_a == o.trans_a && trans_b == o.trans_b;
  }
};

// The parameter GEMMs of one optimizer step of grad_accum micro-batches of batch x seq_len tokens.
std::vector<GemmShape> model_gemm_shapes(const ModelConfig& model, int batch, int seq_len, int grad_accum,
                                         const LoraSpec& lora = {});

struct GemmRate {
  GemmShape shape;
  double best_seconds = 0.0;  // fastest of the timed calls
  double gflops = 0.0;        // shape.flops() / best_seconds / 1e9
};

struct GemmPeak {
  std::vector<GemmRate> rates;
  double step_flops = 0.0;            // sum of flops x per_step
  double step_seconds_at_peak = 0.0;  // sum of flops x per_step / rate
  double weighted_gflops() const { return step_seconds_at_peak > 0.0 ? step_flops / step_seconds_at_peak / 1e9 : 0.0; }
};

// Times cblas_sgemm on each shape (one untimed call, then reps timed ones; the best counts) with the
// calling thread's current OpenMP/OpenBLAS thread count. Allocates its operands, so call it outside the
// timed steps.
GemmPeak measure_gemm_peak(const std::vector<GemmShape>& shapes, int reps);

}  // namespace gpt::bench
