// The FP32 engine of narrow matrix products: decode into the workspace, sgemm, encode (narrow_matmul.h).
// Layout: row-major, op(a) is [m,k], op(b) [k,n], out [m,n] with row length n. A tile is the output block
// [m0, m0+mb) x [n0, n0+nb) over the inner chunk [k0, k0+kb): a narrow operand's part of it is decoded
// into a dense FP32 block (leading dimension its width), a wide one is read in place; a narrow out block is
// computed in a dense FP32 block and encoded once every chunk has been added, after bias and beta.
#include "cpu/narrow_matmul.h"

#include "cpu/convert.h"
#include "cpu/one_row_product.h"
#include "cpu/onednn_matmul.h"

#include <cblas.h>

#include <algorithm>
#include <cstring>

namespace gpt::cpu {
namespace {

// Below this many elements a parallel region costs more than it saves (the conversions' bar, convert.cpp).
constexpr int64_t kParallelMin = 1 << 18;
// A split dimension keeps blocks of at least this many rows or columns (unless the dimension is smaller):
// below it OpenBLAS's packing and thread start cost more than the product.
constexpr int64_t kMinBlock = 64;

bool is_narrow(const Tensor& t) { return !t.empty() && is_narrow_float(t.dtype); }

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Equal blocks of at most `block` covering `size`: no thin last block.
int64_t balanced(int64_t size, int64_t block) { return ceil_div(size, ceil_div(size, block)); }

// Floats a tile of [mb, nb] over a chunk of kb needs in the workspace.
struct Needs {
  int64_t a, b, c, bias;  // 1 where that tensor is narrow (staged), else 0
  int64_t floats(int64_t mb, int64_t nb, int64_t kb, int64_t n) const { return a * mb * kb + b * kb * nb + c * mb * nb + bias * n; }
};

Needs needs_of(const MatmulArgs& args) {
  return {is_narrow(args.a), is_narrow(args.b), is_narrow(args.out), is_narrow(args.bias)};
}

// rows [r0, r0+nr) x columns [c0, c0+nc) of the row-major narrow matrix t (row length ld) as dense FP32.
void decode_block(const Tensor& t, int64_t ld, int64_t r0, int64_t nr, int64_t c0, int64_t nc, float* dst) {
  const size_t esize = dtype_size(t.dtype);
  if (c0 == 0 && nc == ld) {
    // Whole rows are contiguous: one pass, as the untiled product decoded them. (Splitting the demo's
    // operands, 2^15 to 2^18 elements, over the threads below convert.cpp's bar cost more CPU time than it
    // saved on the shared 2-core machine: 377 against 307-320 ms of matmul CPU time per step.)
    decode<float>(Tensor(static_cast<char*>(t.data) + static_cast<size_t>(r0 * ld) * esize, {nr * nc}, t.dtype), dst, nr * nc,
                  1.0f);
    return;
  }
#pragma omp parallel for schedule(static) if (nr * nc > kParallelMin)
  for (int64_t r = 0; r < nr; ++r) {
    const Tensor row(static_cast<char*>(t.data) + static_cast<size_t>((r0 + r) * ld + c0) * esize, {nc}, t.dtype);
    decode<float>(row, dst + r * nc, nc, 1.0f);
  }
}

// Adds one encoding pass's statistics to a parallel region's reduction variables (this thread's copies).
void add_pass(const QuantStats& s, int64_t& underflow, int64_t& overflow, double& amax, int& nan) {
  underflow += s.underflow;
  overflow += s.overflow;
  amax = std::max(amax, s.amax);
  nan |= s.nan ? 1 : 0;
}

// The dense FP32 block src [nr, nc] stored into out's rows [r0, r0+nr), columns [c0, c0+nc) (row length ld),
// with out's scale for FP8; the statistics go to out's scaling state.
void encode_block(const float* src, const Tensor& out, int64_t ld, int64_t r0, int64_t nr, int64_t c0, int64_t nc) {
  Fp8Meta* meta = out.scaling;
  const float scale = meta ? meta->scale : 1.0f;
  const size_t esize = dtype_size(out.dtype);
  int64_t underflow = 0, overflow = 0;
  double amax = 0.0;
  int nan = 0;
  if (c0 == 0 && nc == ld) {
    // Whole rows are contiguous: one pass.
    add_pass(encode<float>(src, Tensor(static_cast<char*>(out.data) + static_cast<size_t>(r0 * ld) * esize, {nr * nc}, out.dtype),
                           nr * nc, scale, true),
             underflow, overflow, amax, nan);
  } else {
#pragma omp parallel for schedule(static) reduction(+ : underflow, overflow) reduction(max : amax) reduction(| : nan) \
    if (nr * nc > kParallelMin)
    for (int64_t r = 0; r < nr; ++r) {
      const Tensor row(static_cast<char*>(out.data) + static_cast<size_t>((r0 + r) * ld + c0) * esize, {nc}, out.dtype);
      add_pass(encode<float>(src + r * nc, row, nc, scale, true), underflow, overflow, amax, nan);
    }
  }
  if (meta) add_stats(*meta, {underflow, overflow, amax, nan != 0});
}

void broadcast_rows(float* c, int64_t ldc, const float* bias, int64_t rows, int64_t cols) {
#pragma omp parallel for schedule(static) if (rows * cols > kParallelMin)
  for (int64_t i = 0; i < rows; ++i) std::memcpy(c + i * ldc, bias, static_cast<size_t>(cols) * sizeof(float));
}

void add_rows(float* c, int64_t ldc, const float* bias, int64_t rows, int64_t cols) {
#pragma omp parallel for schedule(static) if (rows * cols > kParallelMin)
  for (int64_t i = 0; i < rows; ++i) {
    float* row = c + i * ldc;
    for (int64_t j = 0; j < cols; ++j) row[j] += bias[j];
  }
}

void sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
           const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m == 1) {
    one_row_product<float>(trans_a, trans_b, static_cast<int>(n), static_cast<int>(k), alpha, a, static_cast<int>(lda), b,
                           static_cast<int>(ldb), beta, c);
    return;
  }
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, static_cast<int>(m),
              static_cast<int>(n), static_cast<int>(k), alpha, a, static_cast<int>(lda), b, static_cast<int>(ldb), beta, c,
              static_cast<int>(ldc));
}

// Where a tile's part of one operand is: op(x) is [rows, cols] (a's [m,k] or b's [k,n], x itself stored
// transposed when `trans`), with row length ld as stored, and the tile takes its rows [r0, r0+nr) and
// columns [c0, c0+nc). A narrow operand's part is decoded into `block` (unless the previous tile left it
// there, as `staged` records), a wide one's is read in place.
struct OperandBlock {
  const float* data;
  int64_t ld;
};
struct StagedBlock {
  int64_t r0 = -1, c0 = -1;
};
OperandBlock operand_block(const Tensor& x, bool trans, bool narrow, int64_t ld, int64_t r0, int64_t nr, int64_t c0,
                           int64_t nc, float* block, StagedBlock& staged) {
  if (!narrow) return {x.as<float>() + (trans ? c0 * ld + r0 : r0 * ld + c0), ld};
  if (staged.r0 != r0 || staged.c0 != c0) {
    if (trans) decode_block(x, ld, c0, nc, r0, nr, block);
    else decode_block(x, ld, r0, nr, c0, nc, block);
    staged = {r0, c0};
  }
  return {block, trans ? nr : nc};
}

void fp32_engine(const MatmulArgs& args, const GemmShape2D& s, MatmulWorkspace& workspace) {
  const Needs need = needs_of(args);
  const auto capacity = static_cast<int64_t>(workspace.capacity_bytes() / sizeof(float));
  const NarrowTiles tiles = choose_tiles(args, s, capacity);
  const int64_t m = s.m, n = s.n, k = s.k;
  // The workspace, in order: bias [n], the a block, the b block, the out block.
  float* ws = static_cast<float*>(workspace.data());
  float* bias = need.bias ? ws : args.bias.empty() ? nullptr : args.bias.as<float>();
  float* a_block = ws + need.bias * n;
  float* b_block = a_block + need.a * tiles.mb * tiles.kb;
  float* c_block = b_block + need.b * tiles.kb * tiles.nb;
  if (need.bias) decode<float>(args.bias, bias, n, 1.0f);
  // With beta = 0 the bias is the first chunk's starting value (beta = 1), as in the wide product.
  const bool bias_first = bias && args.beta == 0.0f;
  StagedBlock a_staged, b_staged;
  for (int64_t m0 = 0; m0 < m; m0 += tiles.mb) {
    const int64_t mb = std::min(tiles.mb, m - m0);
    for (int64_t n0 = 0; n0 < n; n0 += tiles.nb) {
      const int64_t nb = std::min(tiles.nb, n - n0);
      float* c = need.c ? c_block : args.out.as<float>() + m0 * n + n0;
      const int64_t ldc = need.c ? nb : n;
      if (need.c && args.beta != 0.0f) decode_block(args.out, n, m0, mb, n0, nb, c);
      if (bias_first) broadcast_rows(c, ldc, bias + n0, mb, nb);
      for (int64_t k0 = 0; k0 < k; k0 += tiles.kb) {
        const int64_t kb = std::min(tiles.kb, k - k0);
        const OperandBlock a = operand_block(args.a, args.trans_a, need.a, s.lda, m0, mb, k0, kb, a_block, a_staged);
        const OperandBlock b = operand_block(args.b, args.trans_b, need.b, s.ldb, k0, kb, n0, nb, b_block, b_staged);
        const float beta = k0 > 0 || bias_first ? 1.0f : args.beta;
        sgemm(args.trans_a, args.trans_b, mb, nb, kb, args.alpha, a.data, a.ld, b.data, b.ld, beta, c, ldc);
      }
      if (bias && !bias_first) add_rows(c, ldc, bias + n0, mb, nb);
      if (need.c) encode_block(c, args.out, n, m0, mb, n0, nb);
    }
  }
}

}  // namespace

MatmulWorkspace::MatmulWorkspace(size_t capacity_bytes)
    : capacity_((capacity_bytes + static_cast<size_t>(kAlign) - 1) / static_cast<size_t>(kAlign) * static_cast<size_t>(kAlign)) {}

void* MatmulWorkspace::data() {
  if (!storage_) storage_.reset(static_cast<std::byte*>(::operator new[](capacity_, kAlign)));
  return storage_.get();
}

NarrowTiles choose_tiles(const MatmulArgs& args, const GemmShape2D& s, int64_t capacity) {
  const Needs need = needs_of(args);
  const int64_t m = s.m, n = s.n, k = s.k;
  NarrowTiles t{m, n, k, m, n, k};
  if (need.floats(m, n, k, n) <= capacity) return t;
  // Whole rows of the output and all of k: blocks of columns (b's and out's parts shrink, a is decoded once).
  if (const int64_t per_column = need.b * k + need.c * m; per_column > 0) {
    const int64_t columns = (capacity - need.a * m * k - need.bias * n) / per_column;
    if (columns >= std::min(n, kMinBlock)) {
      t.nb = balanced(n, columns);
      return t;
    }
  }
  // Whole columns and all of k: blocks of rows (a is the large operand: a weight gradient's op(a)).
  if (const int64_t per_row = need.a * k + need.c * n; per_row > 0) {
    const int64_t rows = (capacity - need.b * k * n - need.bias * n) / per_row;
    if (rows >= std::min(m, kMinBlock)) {
      t.mb = balanced(m, rows);
      return t;
    }
  }
  // Both operands are long in k (the LM head's input gradient, k = vocabulary): chunks of k accumulated
  // with beta = 1, the out block no larger than half the workspace.
  const int64_t bias_floats = need.bias * n;
  GPT_CHECK(bias_floats + 2 <= capacity, "matmul: the {}-byte narrow-product workspace cannot hold a bias of {} values",
            capacity * 4, n);
  while (need.c * t.mb * t.nb > (capacity - bias_floats) / 2) {
    if (t.mb >= t.nb) t.mb = ceil_div(t.mb, 2);
    else t.nb = ceil_div(t.nb, 2);
  }
  const int64_t per_k = need.a * t.mb + need.b * t.nb;
  const int64_t kb = per_k == 0 ? k : (capacity - bias_floats - need.c * t.mb * t.nb) / per_k;
  GPT_CHECK(kb >= 1, "matmul: the {}-byte narrow-product workspace cannot hold one column of [{}x{}]x[{}x{}]", capacity * 4, m,
            k, k, n);
  t.mb = balanced(m, t.mb);
  t.nb = balanced(n, t.nb);
  t.kb = balanced(k, std::min(k, kb));
  return t;
}

void narrow_matmul(const MatmulArgs& args, const GemmShape2D& shape, MatmulWorkspace& workspace, OnednnMatmul* onednn) {
  GPT_CHECK(!is_narrow(args.out) || (args.out.data != args.a.data && args.out.data != args.b.data),
            "matmul: a narrow out must not alias an operand");
  for (const Tensor* t : {&args.out, &args.a, &args.b, &args.bias}) {
    GPT_CHECK(t->empty() || is_narrow(*t) || t->dtype == DType::F32,
              "matmul: a {} tensor beside narrow ones; the wide operands of a narrow product are F32", dtype_name(t->dtype));
  }
  if (onednn && onednn->try_run(args, shape, workspace)) return;
  fp32_engine(args, shape, workspace);
}

}  // namespace gpt::cpu
