// One new position's attention over a KV cache, every head (AttentionDecodeArgs, op_args.h):
//   k_h[length-1] = k, v_h[length-1] = v;  s_j = scale * q_h . k_h[j];  p = softmax(s);  out_h = p v_h
// for j < length. On the CPU it is the composition of this backend's own ops, head after head: two row
// copies into the cache, a one-row product for the scores (FP32, in scratch row h), the softmax in place,
// and a one-row product for the output. So the CPU's decoding is the arithmetic of those ops, which the
// decoder's tests compare with the full forward; the CUDA backend fuses the same steps into one kernel
// (cuda/kernels/attention_decode.cu), against which the op table holds this one.
#include "cpu/cpu_backend.h"
#include "backend/op_checks.h"

namespace gpt::cpu {

void CpuBackend::attention_decode(const AttentionDecodeArgs& args) {
  const DecodeShape s = check_attention_decode(args);
  const int64_t hs = s.head_size, C = s.heads * hs, t = args.length;
  const Tensor qkv = args.qkv.reshaped({3 * C}), out = args.out.reshaped({C});
  for (int64_t h = 0; h < s.heads; ++h) {
    const Tensor keys = args.k_cache[h], values = args.v_cache[h];
    copy({keys[t - 1], qkv.elements(C + h * hs, hs)});
    copy({values[t - 1], qkv.elements(2 * C + h * hs, hs)});
    const Tensor scores = args.scratch[h].elements(0, t).reshaped({1, t});
    const Tensor q = qkv.elements(h * hs, hs).reshaped({1, hs});
    matmul({scores, q, keys.prefix({t, hs}), Tensor(), false, true, args.scale});
    softmax_forward({scores, scores});
    matmul({out.elements(h * hs, hs).reshaped({1, hs}), scores, values.prefix({t, hs}), Tensor()});
  }
}

}  // namespace gpt::cpu
