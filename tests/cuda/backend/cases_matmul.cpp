// Op table cases of matmul (cuda/gemm/matmul.cpp): every operand-format combination the recipes pass,
// each with every pair of transposes (so FP8 operands come in non-TN layouts too, which Gemm transposes
// into the staging the case passes),
// bias on and off, beta 0 and 1 (out accumulated), at shapes that are not multiples of any tile
// (FP8: multiples of 16, as cuBLASLt requires, but not of 32 or 128; and the rows and the K off them that
// Gemm splits or pads).
#include "cuda/backend/op_table.h"

#include "backend/matmul_staging.h"

#include <set>

namespace gpt::test {
namespace {

struct Formats {
  DType a, b, out, bias;
};

bool is_fp8(DType t) { return t == DType::E4M3 || t == DType::E5M2; }

std::vector<OpCase> cases() {
  const Formats wide[] = {
      {DType::F32, DType::F32, DType::F32, DType::F32},    {DType::BF16, DType::BF16, DType::BF16, DType::BF16},
      {DType::BF16, DType::BF16, DType::F32, DType::F32},  {DType::F16, DType::F16, DType::F16, DType::F16},
      {DType::F16, DType::F16, DType::F32, DType::F32},
      // fp8 with backward bf16: a BF16 output gradient times an E4M3 weight or input.
      {DType::BF16, DType::E4M3, DType::BF16, DType::BF16}, {DType::E4M3, DType::BF16, DType::F32, DType::F32},
  };
  const Formats fp8[] = {
      {DType::E4M3, DType::E4M3, DType::BF16, DType::BF16},  // forward
      {DType::E4M3, DType::E4M3, DType::F32, DType::BF16},   // BF16 bias: the FP8 epilogue's
      {DType::E4M3, DType::E4M3, DType::F32, DType::F32},    // F32 bias: a bias pass
      {DType::E4M3, DType::E4M3, DType::F16, DType::F16},
      {DType::E5M2, DType::E4M3, DType::BF16, DType::BF16},  // backward: output gradient x weight
      {DType::E5M2, DType::E4M3, DType::F32, DType::F32},    // backward: weight gradient, accumulated
      {DType::E4M3, DType::E5M2, DType::BF16, DType::BF16},
  };
  struct Shape {
    int64_t m, n, k;
  };
  std::vector<OpCase> out;
  std::set<std::string> names;  // without a bias, formats that differ only in the bias's are one case
  const auto add = [&](const Formats& f, Shape s, bool trans_a, bool trans_b, bool bias, bool accumulate) {
    const std::string name = fmt::format("matmul/{}x{}->{}{}/{}x{}x{}/{}{}{}", format_tag(f.a), format_tag(f.b),
                                         format_tag(f.out), bias ? fmt::format("+{}bias", format_tag(f.bias)) : "",
                                         s.m, s.n, s.k, trans_a ? "T" : "N", trans_b ? "T" : "N",
                                         accumulate ? "/beta1" : "/beta0");
    if (!names.insert(name).second) return;
    out.push_back({name, [=](OpBench& b) {
                     MatmulArgs args;
                     args.trans_a = trans_a;
                     args.trans_b = trans_b;
                     args.a = trans_a ? b.input({s.k, s.m}, f.a) : b.input({s.m, s.k}, f.a);
                     args.b = trans_b ? b.input({s.n, s.k}, f.b) : b.input({s.k, s.n}, f.b);
                     // FP8 operands carry scaling state whose inverse scales the product applies.
                     if (is_fp8(f.a)) args.a.scaling = b.fp8_meta(2.0f);
                     if (is_fp8(f.b)) args.b.scaling = b.fp8_meta(0.25f);
                     if (bias) args.bias = b.input({s.n}, f.bias);
                     args.out = accumulate ? b.accumulated({s.m, s.n}, f.out) : b.output({s.m, s.n}, f.out);
                     args.alpha = 0.75f;
                     args.beta = accumulate ? 1.0f : 0.0f;
                     // Exactly the bytes the plan's rule gives: a copy that strays past them fails.
                     const size_t staged = matmul_staging({f.a, f.b, s.m, s.n, s.k, trans_a, trans_b}).bytes;
                     if (staged > 0) args.staging = b.scratch({static_cast<int64_t>(staged)}, DType::U8);
                     b.backend().matmul(args);
                   }});
  };
  for (bool trans_a : {false, true})
    for (bool trans_b : {false, true})
      for (bool bias : {false, true})
        for (bool accumulate : {false, true}) {
          for (const Formats& f : wide) {
            add(f, {67, 200, 40}, trans_a, trans_b, bias, accumulate);
            if (!bias && !accumulate) add(f, {1, 104, 97}, trans_a, trans_b, bias, accumulate);
          }
          for (const Formats& f : fp8) add(f, {48, 80, 64}, trans_a, trans_b, bias, accumulate);
        }
  // FP8 off the 16-multiples where Gemm makes up for it: 67 rows of a stored as is (cuBLASLt takes 64, the
  // row product 3), and K = 67 with both operands transposed (a weight gradient's copies, padded to 80).
  for (const Formats& f : fp8)
    for (bool bias : {false, true})
      for (bool accumulate : {false, true}) {
        for (bool trans_b : {false, true}) add(f, {67, 80, 64}, false, trans_b, bias, accumulate);
        add(f, {48, 80, 67}, true, false, bias, accumulate);
      }
  // A three-dimensional activation times a weight: leading dimensions fold into rows (a linear layer).
  out.push_back({"matmul/bf16xbf16->bf16+bias/linear_2x67x200", [](OpBench& b) {
                   b.backend().matmul({b.output({2, 67, 96}, DType::BF16), b.input({2, 67, 200}, DType::BF16),
                                       b.input({96, 200}, DType::BF16), b.input({96}, DType::BF16), false, true});
                 }});
  return out;
}

// Products of a few rows in format pairs cuBLASLt does not take (formats that differ, FP8 at sizes off the
// 16-multiples, an FP8 out, 16-bit x FP8 without staging): the KV-cache decoder's, which Gemm sends to
// row_product.cu. Both layouts of b (a weight [N,K] and a cache of values [K,N]), bias on and off.
std::vector<OpCase> row_product_cases() {
  const Formats pairs[] = {
      {DType::F32, DType::BF16, DType::BF16, DType::BF16},  // probabilities x cached values (bf16)
      {DType::F32, DType::BF16, DType::F32, DType::F32},   {DType::F32, DType::F16, DType::F16, DType::F16},
      {DType::BF16, DType::F32, DType::F32, DType::BF16},  {DType::F32, DType::E4M3, DType::BF16, DType::BF16},
      {DType::E4M3, DType::E4M3, DType::BF16, DType::BF16},  // fp8 forward at K = 200, N = 67
      {DType::E4M3, DType::E4M3, DType::F32, DType::F32},   {DType::E4M3, DType::E4M3, DType::E4M3, DType::BF16},
      {DType::BF16, DType::E4M3, DType::BF16, DType::BF16}, {DType::F16, DType::E4M3, DType::F16, DType::F16},
      {DType::E4M3, DType::BF16, DType::F32, DType::F32},   {DType::E5M2, DType::E4M3, DType::BF16, DType::F32},
      {DType::E5M2, DType::E5M2, DType::F32, DType::F32},
  };
  std::vector<OpCase> out;
  const auto add = [&](const Formats& f, int64_t m, bool trans_a, bool trans_b, bool bias, int64_t k = 200) {
    constexpr int64_t n = 67;
    const std::string name = fmt::format("matmul/row/{}x{}->{}{}/{}x{}x{}/{}{}", format_tag(f.a), format_tag(f.b),
                                         format_tag(f.out), bias ? fmt::format("+{}bias", format_tag(f.bias)) : "", m,
                                         n, k, trans_a ? "T" : "N", trans_b ? "T" : "N");
    out.push_back({name, [=](OpBench& b) {
                     MatmulArgs args;
                     args.trans_a = trans_a;
                     args.trans_b = trans_b;
                     args.a = trans_a ? b.input({k, m}, f.a) : b.input({m, k}, f.a);
                     args.b = trans_b ? b.input({n, k}, f.b) : b.input({k, n}, f.b);
                     if (is_fp8(f.a)) args.a.scaling = b.fp8_meta(2.0f);
                     if (is_fp8(f.b)) args.b.scaling = b.fp8_meta(0.25f);
                     if (bias) args.bias = b.input({n}, f.bias);
                     args.out = b.output({m, n}, f.out);
                     // An FP8 out is stored with its scale, and its statistics are compared too.
                     if (is_fp8(f.out)) args.out.scaling = b.fp8_meta(1.0f);
                     args.alpha = 0.75f;
                     b.backend().matmul(args);
                   }});
  };
  for (const Formats& f : pairs)
    for (bool trans_b : {false, true})
      for (bool bias : {false, true}) add(f, 1, false, trans_b, bias);
  // A few rows, a stored transposed: the kernel's row and column indexing beyond one row.
  add({DType::F32, DType::BF16, DType::BF16, DType::BF16}, 3, true, true, true);
  add({DType::E4M3, DType::E4M3, DType::BF16, DType::BF16}, 5, true, false, false);
  // b stored [N,K]: K = 200 reads rows in packs of 8 (one a lane), K = 768 and 520 in several packs a
  // lane, K = 197 element by element; a few rows of a stored as is read in packs too.
  add({DType::F32, DType::BF16, DType::BF16, DType::BF16}, 1, false, true, true, 197);
  add({DType::E4M3, DType::E4M3, DType::F32, DType::F32}, 1, false, true, false, 197);
  add({DType::F32, DType::E4M3, DType::BF16, DType::BF16}, 1, false, true, true, 768);
  add({DType::BF16, DType::E4M3, DType::BF16, DType::BF16}, 4, false, true, true, 520);
  return out;
}

const OpCases registered(cases());
const OpCases registered_row_products(row_product_cases());

}  // namespace
}  // namespace gpt::test
