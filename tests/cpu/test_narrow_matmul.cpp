// The narrow matrix products (src/cpu/narrow_matmul.h, onednn_matmul.h): every operand format x both
// transpositions x odd sizes (not multiples of 8), random inputs, outputs poisoned first.
//  - Untiled, the FP32 engine is today's exact emulation bit for bit: the operands decoded to FP32, one
//    F32 matmul (sgemm), the output encoded once.
//  - Tiled (a backend with a small workspace forces column blocks, row blocks and inner-dimension chunks),
//    it is within the FP32-accumulation tolerance of the FP64 reference, and its difference from the
//    untiled product is printed (the README states it).
//  - oneDNN's primitive, with F32 operands (which every CPU has), applies alpha, beta, bias and strides as
//    sgemm does; its BF16 products, where this CPU has them natively, are within tolerance of the FP32 engine.
//  - The workspace is planned: the plan counts it for narrow recipes only, and the backend holds it only
//    once a narrow product has run.
#include "cpu/cpu_backend.h"
#include "cpu/narrow_matmul.h"
#include "cpu/onednn_matmul.h"
#include "memory/planner.h"
#include "memory/recompute.h"

#include "cpu/gradcheck.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace gpt {
namespace {

// Normwise tolerance of a product stored in `format` after FP32 accumulation over k terms.
double tolerance(DType format, int64_t k) {
  const double fp32 = 2.0 * static_cast<double>(k) * 0x1p-24;
  switch (format) {
    case DType::BF16: return 0x1p-8 + fp32;
    case DType::F16: return 0x1p-11 + fp32;
    default: return fp32;
  }
}

Tensor matrix(std::vector<std::byte>& storage, int64_t rows, int64_t cols, DType dtype) {
  storage.assign(static_cast<size_t>(rows * cols) * dtype_size(dtype), std::byte{0xFF});  // poisoned: NaN in every format
  return Tensor(storage.data(), {rows, cols}, dtype);
}

std::vector<double> values_of(cpu::CpuBackend& be, const Tensor& t) {
  std::vector<double> out(static_cast<size_t>(t.numel()));
  be.cast({Tensor(out.data(), {t.numel()}, DType::F64), t.reshaped({t.numel()})});
  return out;
}

// One product: a, b in `format` (random, scaled so E4M3's range holds them; FP8 with an inverse scale),
// out in `out_format` (F32 accumulating with beta = 1, else poisoned with a bias and beta = 0).
struct Product {
  int64_t m, n, k;
  bool trans_a, trans_b;
  DType format, out_format;
  std::vector<std::byte> a_bytes, b_bytes, bias_bytes, out0_bytes;
  Tensor a, b, bias, out0;
  Fp8Meta a_meta, b_meta;

  Product(int64_t m_, int64_t n_, int64_t k_, bool ta, bool tb, DType f, DType of, uint32_t seed)
      : m(m_), n(n_), k(k_), trans_a(ta), trans_b(tb), format(f), out_format(of) {
    cpu::CpuBackend& be = test::cpu_backend();
    a = matrix(a_bytes, ta ? k : m, ta ? m : k, f);
    b = matrix(b_bytes, tb ? n : k, tb ? k : n, f);
    const bool fp8 = f == DType::E4M3 || f == DType::E5M2;
    a_meta.scale = 4.0f;
    a_meta.scale_inv = 0.25f;
    b_meta.scale = 0.5f;
    b_meta.scale_inv = 2.0f;
    std::vector<double> va = test::random_vector(static_cast<size_t>(m * k), seed, 2.0);
    std::vector<double> vb = test::random_vector(static_cast<size_t>(k * n), seed + 1, 2.0);
    be.cast({a.reshaped({m * k}), Tensor(va.data(), {m * k}, DType::F64)});
    be.cast({b.reshaped({k * n}), Tensor(vb.data(), {k * n}, DType::F64)});
    if (fp8) {
      a.scaling = &a_meta;
      b.scaling = &b_meta;
    }
    if (of == DType::F32) {
      std::vector<double> v0 = test::random_vector(static_cast<size_t>(m * n), seed + 2, 3.0);
      out0 = matrix(out0_bytes, m, n, DType::F32);
      be.cast({out0.reshaped({m * n}), Tensor(v0.data(), {m * n}, DType::F64)});
    } else {
      std::vector<double> vbias = test::random_vector(static_cast<size_t>(n), seed + 3, 1.0);
      bias = matrix(bias_bytes, 1, n, of);
      bias = bias.reshaped({n});
      be.cast({bias, Tensor(vbias.data(), {n}, DType::F64)});
    }
  }
  float beta() const { return out_format == DType::F32 ? 1.0f : 0.0f; }
  float alpha() const { return a.scaling ? a_meta.scale_inv * b_meta.scale_inv : 1.0f; }
  std::string name() const {
    return fmt::format("[{}x{}]x[{}x{}] {}{} {} -> {}", m, k, k, n, trans_a ? 'T' : 'N', trans_b ? 'T' : 'N',
                       dtype_name(format), dtype_name(out_format));
  }

  // out on `be` through its narrow product; returns out's storage.
  std::vector<std::byte> run(cpu::CpuBackend& be) const {
    std::vector<std::byte> storage;
    Tensor out = matrix(storage, m, n, out_format);
    if (!out0.empty()) std::memcpy(storage.data(), out0.data, out0.bytes());
    be.matmul({out, a, b, bias, trans_a, trans_b, 1.0f, beta()});
    return storage;
  }

  // Today's exact emulation: the operands decoded to FP32 (unscaled codes for FP8), one F32 matmul with the
  // inverse scales in alpha, the output encoded into its format once.
  std::vector<std::byte> emulated() const {
    cpu::CpuBackend& be = test::cpu_backend();
    auto wide = [&](const Tensor& t) {
      std::vector<float> v(static_cast<size_t>(t.numel()));
      Tensor codes = t;
      codes.scaling = nullptr;
      be.cast({Tensor(v.data(), {t.numel()}, DType::F32), codes.reshaped({t.numel()})});
      return v;
    };
    std::vector<float> wa = wide(a), wb = wide(b), wbias = bias.empty() ? std::vector<float>{} : wide(bias);
    std::vector<float> wout(static_cast<size_t>(m * n));
    if (!out0.empty()) std::memcpy(wout.data(), out0.data, out0.bytes());
    be.matmul({Tensor(wout.data(), {m, n}), Tensor(wa.data(), {a.shape[0], a.shape[1]}), Tensor(wb.data(), {b.shape[0], b.shape[1]}),
               bias.empty() ? Tensor() : Tensor(wbias.data(), {n}), trans_a, trans_b, alpha(), beta()});
    std::vector<std::byte> storage;
    Tensor out = matrix(storage, m, n, out_format);
    be.cast({out, Tensor(wout.data(), {m, n})});
    return storage;
  }

  // The FP64 reference on the decoded (scaled) operands.
  std::vector<double> reference() const {
    cpu::CpuBackend& be = test::cpu_backend();
    const std::vector<double> da = values_of(be, a), db = values_of(be, b);
    const std::vector<double> dbias = bias.empty() ? std::vector<double>{} : values_of(be, bias);
    const std::vector<double> d0 = out0.empty() ? std::vector<double>{} : values_of(be, out0);
    std::vector<double> out(static_cast<size_t>(m * n));
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double s = 0.0;
        for (int64_t p = 0; p < k; ++p) s += (trans_a ? da[p * m + i] : da[i * k + p]) * (trans_b ? db[j * k + p] : db[p * n + j]);
        out[i * n + j] = s + (d0.empty() ? 0.0 : d0[i * n + j]) + (dbias.empty() ? 0.0 : dbias[j]);
      }
    }
    return out;
  }

  std::vector<double> decode(const std::vector<std::byte>& storage) const {
    std::vector<std::byte> copy = storage;
    return values_of(test::cpu_backend(), Tensor(copy.data(), {m, n}, out_format));
  }
};

struct Error {
  double max_abs = 0.0, max_ref = 0.0;
  double normwise() const { return max_ref > 0.0 ? max_abs / max_ref : max_abs; }
};

Error compare(const std::vector<double>& got, const std::vector<double>& ref) {
  Error e;
  for (size_t i = 0; i < ref.size(); ++i) {
    e.max_ref = std::max(e.max_ref, std::abs(ref[i]));
    e.max_abs = std::max(e.max_abs, std::isfinite(got[i]) ? std::abs(got[i] - ref[i]) : INFINITY);
  }
  return e;
}

constexpr DType kFormats[] = {DType::BF16, DType::F16, DType::E4M3, DType::E5M2};

// FP8 operands produce BF16 in the model; the 16-bit formats produce their own format.
DType narrow_out(DType format) { return format == DType::F16 ? DType::F16 : DType::BF16; }

TEST(NarrowMatmul, UntiledIsTodaysExactEmulationBitForBit) {
  std::random_device rd;
  const uint32_t seed = rd();
  SCOPED_TRACE("seed " + std::to_string(seed));
  // precision.cpu_narrow_matmul: exact, so that oneDNN (whose order of accumulation differs, the test
  // below) never takes the products.
  cpu::CpuBackend be(0, cpu::kNarrowMatmulWorkspaceBytes, true);
  for (DType format : kFormats) {
    for (int t = 0; t < 4; ++t) {
      for (DType out_format : {narrow_out(format), DType::F32}) {
        const Product p(37, 29, 45, t & 1, t & 2, format, out_format, seed + static_cast<uint32_t>(t));
        SCOPED_TRACE(p.name());
        const std::vector<std::byte> got = p.run(be), want = p.emulated();
        EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size()), 0);
        const Error e = compare(p.decode(got), p.reference());
        EXPECT_LE(e.normwise(), tolerance(out_format, p.k));
      }
    }
  }
}

// Workspace sizes that force each kind of tile on [61x45]x[45x53]-sized products (FP32 values): column
// blocks (a and a row of out fit, b does not), row blocks (op(a) large, as a weight gradient's) and
// chunks of k (both operands long in k, as the LM head's input gradient).
TEST(NarrowMatmul, TiledIsWithinTheFp32ToleranceOfTheFp64Reference) {
  std::random_device rd;
  const uint32_t seed = rd();
  SCOPED_TRACE("seed " + std::to_string(seed));
  struct Shape {
    int64_t m, n, k;
    size_t workspace_floats;
    const char* expect;  // which dimension is split
  };
  // The bias (n values), what stays whole, and 70 columns, 70 rows or 300 values of k.
  const Shape shapes[] = {{67, 211, 45, 211 + 67 * 45 + 70 * (45 + 67), "n"},
                          {203, 37, 29, 37 + 29 * 37 + 70 * (29 + 37), "m"},
                          {11, 13, 997, 13 + 11 * 13 + 300 * (11 + 13), "k"}};
  // Both exact: the tiles are the FP32 engine's (oneDNN, where it runs, takes whole products).
  cpu::CpuBackend whole(0, cpu::kNarrowMatmulWorkspaceBytes, true);
  for (const Shape& s : shapes) {
    cpu::CpuBackend small(0, s.workspace_floats * sizeof(float), true);
    for (DType format : kFormats) {
      for (int t = 0; t < 4; ++t) {
        const Product p(s.m, s.n, s.k, t & 1, t & 2, format, narrow_out(format), seed + static_cast<uint32_t>(t));
        SCOPED_TRACE(p.name());
        std::vector<std::byte> out_storage;
        const MatmulArgs args{matrix(out_storage, p.m, p.n, p.out_format), p.a, p.b, p.bias, p.trans_a, p.trans_b};
        const cpu::NarrowTiles tiles = cpu::choose_tiles(
            args, {p.m, p.n, p.k, p.a.shape[1], p.b.shape[1]}, static_cast<int64_t>(small.capabilities().narrow_matmul_workspace_bytes / 4));
        const std::string split = tiles.mb < p.m ? "m" : tiles.nb < p.n ? "n" : tiles.kb < p.k ? "k" : "none";
        EXPECT_EQ(split, s.expect) << tiles.mb << " " << tiles.nb << " " << tiles.kb;
        const std::vector<std::byte> tiled = p.run(small), untiled = p.run(whole);
        const std::vector<double> ref = p.reference();
        const Error e = compare(p.decode(tiled), ref);
        EXPECT_LE(e.normwise(), tolerance(p.out_format, p.k));
        const Error vs_untiled = compare(p.decode(tiled), p.decode(untiled));
        std::printf("tiled (%s split) %s: normwise error %.3g vs FP64, %.3g vs untiled\n", s.expect, p.name().c_str(),
                    e.normwise(), vs_untiled.normwise());
      }
    }
  }
}

TEST(NarrowMatmul, WorkspaceIsPlannedForNarrowRecipesAndHeldOnceANarrowProductRan) {
  cpu::CpuBackend be(0, 1 << 20);
  EXPECT_EQ(be.capabilities().narrow_matmul_workspace_bytes, size_t{1} << 20);
  EXPECT_EQ(be.workspace_bytes(), 0u);
  const Product wide(9, 7, 5, false, true, DType::BF16, DType::F32, 3);
  std::vector<float> a(9 * 5, 1.0f), b(7 * 5, 1.0f), out(9 * 7);
  be.matmul({Tensor(out.data(), {9, 7}), Tensor(a.data(), {9, 5}), Tensor(b.data(), {7, 5}), Tensor(), false, true});
  EXPECT_EQ(be.workspace_bytes(), 0u);  // FP32 products never touch it
  wide.run(be);
  EXPECT_EQ(be.workspace_bytes(), size_t{1} << 20);

  Config c;
  c.model = test::tiny_model(64, 2, 32, 2, 16);
  c.train.batch_size = 2;
  c.train.seq_len = 16;
  const RecomputePolicy policy = resolve_recompute(c.recompute, c.model.n_layer);
  for (const char* recipe : {"fp32", "bf16", "fp16", "fp8"}) {
    c.precision.recipe = recipe;
    const MemoryLedger ledger = ledger_for(c, policy, 2, be.capabilities());
    EXPECT_EQ(ledger.backend_workspace, std::string(recipe) == "fp32" ? 0u : size_t{1} << 20) << recipe;
  }
}

// oneDNN's product with F32 operands: the same epilogue (alpha, then beta out, then the bias, unscaled)
// and strides as the BF16 products use, checked where every CPU has the primitive.
TEST(OnednnMatmul, AppliesAlphaBetaBiasAndStridesLikeSgemm) {
  cpu::OnednnMatmul onednn;
  const int64_t m = 19, n = 23, k = 31;
  std::vector<std::byte> scratch(1 << 20);
  // alpha 1 runs the product as one primitive; alpha != 1 runs it unscaled into an FP32 accumulator, then our epilogue.
  for (int t = 0; t < 8; ++t) {
    for (float beta : {0.0f, 1.0f}) {
      const bool ta = t & 1, tb = t & 2;
      const float alpha = t & 4 ? 0.375f : 1.0f;
      SCOPED_TRACE(fmt::format("{}{} alpha {} beta {}", ta ? 'T' : 'N', tb ? 'T' : 'N', alpha, beta));
      std::vector<float> a = test::to_f32(test::random_vector(m * k, 5 + t % 4)), b = test::to_f32(test::random_vector(k * n, 6 + t % 4));
      std::vector<float> bias = test::to_f32(test::random_vector(n, 7)), out0 = test::to_f32(test::random_vector(m * n, 8));
      std::vector<float> got = out0, want = out0;
      if (!onednn.run(m, n, k, {a.data(), DType::F32, ta, ta ? m : k}, {b.data(), DType::F32, tb, tb ? k : n}, got.data(),
                      DType::F32, Tensor(bias.data(), {n}), alpha, beta, scratch.data(), scratch.size()))
        GTEST_SKIP() << "oneDNN has only its reference F32 matmul here";
      test::cpu_backend().matmul({Tensor(want.data(), {m, n}), Tensor(a.data(), {ta ? k : m, ta ? m : k}),
                                  Tensor(b.data(), {tb ? n : k, tb ? k : n}), Tensor(bias.data(), {n}), ta, tb, alpha, beta});
      // Normwise: oneDNN orders the k products its own way, so single elements that cancel differ relatively more.
      EXPECT_LE(compare(test::to_f64(got), test::to_f64(want)).normwise(), tolerance(DType::F32, k));
    }
  }
}

// oneDNN's BF16 (and FP8-as-BF16) products against the FP32 engine, where this CPU multiplies BF16
// natively; the difference is oneDNN's order of FP32 accumulation, printed.
TEST(OnednnMatmul, NativeBf16ProductsAreWithinToleranceOfTheFp32Engine) {
  const cpu::OnednnInfo info = cpu::onednn_info();
  if (!info.native_bf16) GTEST_SKIP() << "oneDNN " << info.version << " sees " << info.isa << ": no native BF16 products";
  cpu::CpuBackend native(0);  // precision.cpu_narrow_matmul: native, the default
  std::random_device rd;
  const uint32_t seed = rd();
  SCOPED_TRACE("seed " + std::to_string(seed));
  for (DType format : {DType::BF16, DType::E4M3, DType::E5M2}) {
    for (int t = 0; t < 4; ++t) {
      for (DType out_format : {DType::BF16, DType::F32}) {
        const Product p(37, 29, 45, t & 1, t & 2, format, out_format, seed + static_cast<uint32_t>(t));
        SCOPED_TRACE(p.name());
        const std::vector<std::byte> got = p.run(native), fp32_engine = p.emulated();
        const Error e = compare(p.decode(got), p.reference());
        EXPECT_LE(e.normwise(), tolerance(out_format, p.k));
        std::printf("oneDNN %s: normwise error %.3g vs FP64, %.3g vs the FP32 engine\n", p.name().c_str(), e.normwise(),
                    compare(p.decode(got), p.decode(fp32_engine)).normwise());
      }
    }
  }
  EXPECT_FALSE(cpu::onednn_kernels_used().empty());
}

}  // namespace
}  // namespace gpt
