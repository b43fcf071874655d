// Op table cases of the embedding forward and backward (cuda/kernels/embedding.cu): every float format
// (FP8 with scaling state), channels of 200 (vector chunks), 203 (scalar path) and 768, a vocabulary of 5
// padded to 8 (so each bucket of the backward holds many positions) and 97 padded to 104, dropout off and
// on with two different streams (the masks must be the CPU's bit for bit, or kept and dropped elements
// would differ far beyond the tolerance); dwte and dwpe accumulate.
#include "cuda/backend/op_table.h"

namespace gpt::test {
namespace {

struct Shape {
  int64_t b, t, c;
  int vocab;
  int64_t padded;
  std::string tag() const { return fmt::format("{}x{}x{}/v{}of{}", b, t, c, vocab, padded); }
};

constexpr Shape kShapes[] = {{1, 1, 200, 97, 104}, {2, 67, 203, 5, 8}, {3, 5, 768, 97, 104}};

Tensor scaled(OpBench& b, Tensor t, float scale) {
  if (t.dtype == DType::E4M3 || t.dtype == DType::E5M2) t.scaling = b.fp8_meta(scale);
  return t;
}

DropoutSpec dropout(int which) {
  DropoutSpec d;
  if (which == 0) return d;
  d.p = which == 1 ? 0.1f : 0.375f;
  d.stream.seed = which == 1 ? 1234 : 0xDEADBEEFCAFEull;
  d.stream.step = static_cast<uint32_t>(which * 7);
  d.stream.micro_step = 1;
  d.stream.site = RngSite::Embedding;
  return d;
}

std::vector<OpCase> cases() {
  std::vector<OpCase> out;
  for (DType f : kTableFormats) {
    for (const Shape s : kShapes) {
      for (int drop = 0; drop < 3; ++drop) {
        const std::string tag = fmt::format("{}/{}/dropout{}", format_tag(f), s.tag(), drop);
        const int64_t max_t = s.t + 3;
        out.push_back({"embedding_forward/" + tag, [=](OpBench& b) {
                         Tensor tokens = b.tokens({s.b, s.t}, s.vocab);
                         Tensor wte = scaled(b, b.input({s.padded, s.c}, f), 2.0f);
                         Tensor wpe = scaled(b, b.input({max_t, s.c}, f), 4.0f);
                         Tensor y = scaled(b, b.output({s.b, s.t, s.c}, f), 8.0f);
                         b.backend().embedding_forward({y, tokens, wte, wpe, dropout(drop)});
                       }});
        out.push_back({"embedding_backward/" + tag, [=](OpBench& b) {
                         Tensor tokens = b.tokens({s.b, s.t}, s.vocab);
                         Tensor dout = scaled(b, b.input({s.b, s.t, s.c}, f), 4.0f);
                         Tensor dwte = scaled(b, b.accumulated({s.padded, s.c}, f), 2.0f);
                         Tensor dwpe = scaled(b, b.accumulated({max_t, s.c}, f), 2.0f);
                         b.backend().embedding_backward({dwte, dwpe, dout, tokens, dropout(drop)});
                       }});
      }
    }
  }
  // Mixed formats, as a bf16 recipe has them: f32 parameters and their gradients, bf16 activations.
  out.push_back({"embedding_forward/mixed_f32_bf16/2x67x203/v5of8/dropout1", [](OpBench& b) {
                   Tensor tokens = b.tokens({2, 67}, 5);
                   Tensor wte = b.input({8, 203}, DType::F32), wpe = b.input({70, 203}, DType::F32);
                   b.backend().embedding_forward({b.output({2, 67, 203}, DType::BF16), tokens, wte, wpe, dropout(1)});
                 }});
  out.push_back({"embedding_backward/mixed_bf16_f32/2x67x203/v5of8/dropout1", [](OpBench& b) {
                   Tensor tokens = b.tokens({2, 67}, 5);
                   Tensor dout = b.input({2, 67, 203}, DType::BF16);
                   b.backend().embedding_backward({b.accumulated({8, 203}, DType::F32), b.accumulated({70, 203}, DType::F32),
                                                   dout, tokens, dropout(1)});
                 }});
  return out;
}

const OpCases registered(cases());

}  // namespace
}  // namespace gpt::test
