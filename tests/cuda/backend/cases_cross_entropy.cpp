// Op table cases of the fused cross-entropy (cuda/kernels/cross_entropy.cu): logits and dlogits in every
// float format (FP8 with scaling state), a vocabulary of 97 padded to 104 (vector chunks; the padding
// columns of dlogits must come back 0), 50 padded to 67 (scalar path) and 2999 padded to 3008 (several
// chunks a thread: the online max rescales), one row and 67, every fifth target ignored (-1), loss only,
// dlogits apart and dlogits aliasing logits; and bf16 logits with an f32 gradient.
#include "cuda/backend/op_table.h"

namespace gpt::test {
namespace {

struct Shape {
  int64_t rows;
  int vocab;
  int64_t padded;
  std::string tag() const { return fmt::format("{}x{}of{}", rows, vocab, padded); }
};

constexpr Shape kShapes[] = {{1, 97, 104}, {67, 97, 104}, {5, 50, 67}, {3, 2999, 3008}};

Tensor scaled(OpBench& b, Tensor t, float scale) {
  if (t.dtype == DType::E4M3 || t.dtype == DType::E5M2) t.scaling = b.fp8_meta(scale);
  return t;
}

enum class Grad { kNone, kApart, kAliased };

std::vector<OpCase> cases() {
  std::vector<OpCase> out;
  for (DType f : kTableFormats) {
    for (const Shape s : kShapes) {
      for (const Grad g : {Grad::kNone, Grad::kApart, Grad::kAliased}) {
        const char* grad_tag = g == Grad::kNone ? "loss_only" : g == Grad::kApart ? "dlogits" : "dlogits_in_place";
        out.push_back({fmt::format("cross_entropy/{}/{}/{}", grad_tag, format_tag(f), s.tag()), [=](OpBench& b) {
                         CrossEntropyArgs a;
                         a.vocab_size = s.vocab;
                         a.dloss = 0.5f;
                         a.targets = b.tokens({s.rows}, s.vocab, 5);
                         a.losses = b.output({s.rows}, DType::F32);
                         if (g == Grad::kAliased) {
                           a.logits = scaled(b, b.accumulated({s.rows, s.padded}, f, -4.0f, 4.0f), 2.0f);
                           a.dlogits = a.logits;
                         } else {
                           a.logits = scaled(b, b.input({s.rows, s.padded}, f, -4.0f, 4.0f), 2.0f);
                           if (g == Grad::kApart) a.dlogits = scaled(b, b.output({s.rows, s.padded}, f), 256.0f);
                         }
                         b.backend().cross_entropy(a);
                       }});
      }
    }
  }
  // Mixed formats: bf16 logits with an f32 gradient.
  out.push_back({"cross_entropy/dlogits/mixed_bf16_f32/67x97of104", [](OpBench& b) {
                   CrossEntropyArgs a;
                   a.vocab_size = 97;
                   a.dloss = 0.5f;
                   a.targets = b.tokens({67}, 97, 5);
                   a.losses = b.output({67}, DType::F32);
                   a.logits = b.input({67, 104}, DType::BF16, -4.0f, 4.0f);
                   a.dlogits = b.output({67, 104}, DType::F32);
                   b.backend().cross_entropy(a);
                 }});
  return out;
}

const OpCases registered(cases());

}  // namespace
}  // namespace gpt::test
