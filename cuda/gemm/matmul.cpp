// Gemm: MatmulArgs products (row-major) through cuBLASLt (column-major). A row-major X[r, c] with leading
// dimension ld is the column-major X^T [c, r] with the same ld, so out = op(a) op(b) is computed as
// out^T = op(b)^T op(a)^T: cuBLASLt's A is our b (transposed when trans_b), its B our a (transposed when
// trans_a), its D our out, with m = N, n = M and no copies.
//
// Formats, as the recipes pass them (src/model/gpt.cpp, src/precision/precision_layout.h):
//   F32 x F32 -> F32                 FP32 compute (TF32 tensor cores only after set_allow_tf32(true))
//   BF16 x BF16, F16 x F16 -> the same format or F32, FP32 accumulation
//   FP8 x FP8 -> BF16, F16 or F32    E4M3 x E4M3 forward, E5M2 (output gradient) x E4M3 backward; the
//                                    operands' scale_inv are cuBLASLt's A/B scale pointers, read on the
//                                    device; TN only, so an FP8 operand stored the other way is transposed
//                                    into MatmulArgs::staging; N and K multiples of 16 (a K off them is
//                                    padded with zeros where both operands are copied, the weight
//                                    gradient's); M too, except that where a is stored as is, rows past
//                                    the last multiple of 16 go to row_product; compute capability 8.9+
//   BF16/F16 x FP8 (fp8 with backward bf16: the output gradient in BF16, the other operand E4M3): the FP8
//                                    codes widened exactly to the 16-bit format in MatmulArgs::staging, their
//                                    scale_inv folded into alpha on the device (CUBLASLT_POINTER_MODE_DEVICE)
// The staged copies' places are backend/matmul_staging.h's, the rule the activation plan sized the staging
// buffer with (fp8.staging), so a product uses exactly the bytes planned for it.
// A product of at most kRowProductMaxRows rows that cuBLASLt cannot take as given (formats that differ,
// FP8 off the 16-multiples or without the staging its copies need, an FP8 out, a bias of another format:
// the KV-cache decoder's one-row products) goes to row_product.cu's kernel instead, which takes any
// formats. Any other combination fails naming it. F64 (the CPU's gradient checks) is refused.
// out = alpha op(a) op(b) + beta out + bias is one cuBLASLt call with C = D and the BIAS epilogue where the
// bias has the epilogue's type (D's type; BF16 for FP8 products with an F32 output, else the output's),
// so a narrow out is rounded once, after bias and beta, as src/cpu/matmul.cpp does. Otherwise, with an F32
// out, a bias pass follows; a narrow out with a bias of another format is refused.
// The algorithm is chosen once per problem (cublasLtMatmulAlgoGetHeuristic) and cached under every field
// the heuristic sees: shape, formats, transposes, leading dimensions, batch strides, epilogue, compute
// type, pointer mode, scale pointers and the pointers' alignments (which the heuristic is told through
// CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_*_BYTES, so it never picks a kernel that needs more).
#include "gemm/matmul.h"

#include "backend/device_support.h"
#include "backend/matmul_staging.h"
#include "common/cuda_check.h"
#include "gemm/operand_kernels.h"
#include "gemm/row_product.h"

#include <algorithm>
#include <array>
#include <climits>
#include <functional>
#include <map>

namespace gpt::cuda {
namespace {

constexpr size_t kMiB = size_t{1} << 20;
constexpr size_t kScalarBytes = 256;

// cuBLASLt's workspace: 32 MiB on Hopper, 4 MiB below (NVIDIA's recommendation, as llm.c uses).
size_t workspace_bytes_for(int cc) { return cc >= 90 ? 32 * kMiB : 4 * kMiB; }

bool is_16bit(DType t) { return t == DType::BF16 || t == DType::F16; }

cudaDataType_t lt_type(DType t) {
  switch (t) {
    case DType::F32: return CUDA_R_32F;
    case DType::BF16: return CUDA_R_16BF;
    case DType::F16: return CUDA_R_16F;
    case DType::E4M3: return CUDA_R_8F_E4M3;
    case DType::E5M2: return CUDA_R_8F_E5M2;
    default: GPT_FAIL("matmul: cuBLASLt has no {} operands in the CUDA backend", dtype_name(t));
  }
}

// The largest power of two (at most 256) that divides the address: what the heuristic may assume.
uint32_t alignment_of(const void* p) {
  const auto address = reinterpret_cast<uintptr_t>(p);
  uint32_t a = 256;
  while (a > 1 && address % a != 0) a /= 2;
  return a;
}

// One column-major operand of a cuBLASLt call.
struct LtOperand {
  const void* data = nullptr;
  DType dtype = DType::F32;
  int64_t rows = 0, cols = 0, ld = 0, stride = 0;
};

// What a kernel may assume of every column (and batch) of o: the alignment of its start, of ld and of the
// batch stride in bytes. Attention's head views start at odd columns of qkv, so this can be 2 bytes.
uint32_t alignment_of(const LtOperand& o) {
  const auto bytes = [&](int64_t elements) {
    return reinterpret_cast<const void*>(static_cast<uintptr_t>(elements) * dtype_size(o.dtype));
  };
  uint32_t a = std::min(alignment_of(o.data), alignment_of(bytes(o.ld)));
  if (o.stride != 0) a = std::min(a, alignment_of(bytes(o.stride)));
  return a;
}

// One cuBLASLt call: D = alpha op(A) op(B) + beta D (+ bias), column-major, C = D.
struct LtProduct {
  LtOperand a, b, d;
  bool trans_a = false, trans_b = false;
  int batch = 1;
  const void* bias = nullptr;                // BIAS epilogue when set
  const float* a_scale = nullptr;            // FP8 only: device scale_inv of A and B
  const float* b_scale = nullptr;
  const float* device_scalars = nullptr;     // [alpha, beta] in device memory, else alpha and beta below
  float alpha = 1.0f, beta = 0.0f;
};

using AlgoKey = std::array<int64_t, 25>;

std::string view_string(const MatrixView& v) {
  return fmt::format("{} [{},{}] ld {}", dtype_name(v.dtype), v.rows, v.cols, v.ld);
}

// The product out = op(a) op(b) of row-major views, as the cuBLASLt call that computes out^T.
LtProduct column_major(const MatrixView& out, const MatrixView& a, const MatrixView& b, bool trans_a, bool trans_b) {
  LtProduct p;
  p.a = {b.data, b.dtype, b.cols, b.rows, b.ld, b.batch_stride};
  p.b = {a.data, a.dtype, a.cols, a.rows, a.ld, a.batch_stride};
  p.d = {out.data, out.dtype, out.cols, out.rows, out.ld, out.batch_stride};
  p.trans_a = trans_b;
  p.trans_b = trans_a;
  return p;
}

// A product's description for error messages, built only when one is raised: a product runs in
// microseconds of host time, and most of it would go to formatting.
using Describe = std::function<std::string()>;

}  // namespace

struct Gemm::State {
  int compute_capability = 0;
  bool allow_tf32 = false;
  cublasLtHandle_t handle = nullptr;
  void* memory = nullptr;  // one allocation: workspace, scalars
  size_t workspace_bytes = 0;
  void* workspace() const { return memory; }
  float* scalars() const { return reinterpret_cast<float*>(static_cast<char*>(memory) + workspace_bytes); }
  std::map<AlgoKey, cublasLtMatmulAlgo_t> algos;

  void run(const LtProduct& p, const Describe& what, cudaStream_t stream);
};

Gemm::Gemm(int compute_capability) : state_(std::make_unique<State>()) {
  State& s = *state_;
  s.compute_capability = compute_capability;
  s.workspace_bytes = workspace_bytes_for(compute_capability);
  CUBLAS_CHECK(cublasLtCreate(&s.handle));
  CUDA_CHECK(cudaMalloc(&s.memory, s.workspace_bytes + kScalarBytes));
}

Gemm::~Gemm() {
  // Destructors must not throw: failures (a device already in an error state) are ignored.
  if (state_->memory) cudaFree(state_->memory);
  if (state_->handle) cublasLtDestroy(state_->handle);
}

void Gemm::set_allow_tf32(bool allow) { state_->allow_tf32 = allow; }

size_t Gemm::device_bytes() const { return state_->workspace_bytes + kScalarBytes; }

void Gemm::State::run(const LtProduct& p, const Describe& what, cudaStream_t stream) {
  const bool tf32 = allow_tf32 && p.a.dtype == DType::F32;
  const cublasComputeType_t compute = tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  const cublasOperation_t op_a = p.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, op_b = p.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasLtEpilogue_t epilogue = p.bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
  const cublasLtPointerMode_t pointer_mode = p.device_scalars ? CUBLASLT_POINTER_MODE_DEVICE : CUBLASLT_POINTER_MODE_HOST;
  const int64_t m = p.d.rows, n = p.d.cols, k = p.trans_a ? p.a.rows : p.a.cols;
  const uint32_t align_a = alignment_of(p.a), align_b = alignment_of(p.b), align_d = alignment_of(p.d);

  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t layouts[3] = {};
  cublasLtMatmulPreference_t pref = nullptr;
  // The descriptors are host objects, created per call (microseconds) and released however the call ends.
  struct Release {
    cublasLtMatmulDesc_t& desc;
    cublasLtMatrixLayout_t (&layouts)[3];
    cublasLtMatmulPreference_t& pref;
    ~Release() {
      if (pref) cublasLtMatmulPreferenceDestroy(pref);
      for (auto l : layouts)
        if (l) cublasLtMatrixLayoutDestroy(l);
      if (desc) cublasLtMatmulDescDestroy(desc);
    }
  } release{desc, layouts, pref};

  CUBLAS_CHECK(cublasLtMatmulDescCreate(&desc, compute, CUDA_R_32F));
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof op_a));
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof op_b));
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue));
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_POINTER_MODE, &pointer_mode, sizeof pointer_mode));
  if (p.bias) CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &p.bias, sizeof p.bias));
  if (p.a_scale)
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &p.a_scale, sizeof p.a_scale));
  if (p.b_scale)
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &p.b_scale, sizeof p.b_scale));

  const LtOperand* operands[3] = {&p.a, &p.b, &p.d};
  for (int i = 0; i < 3; ++i) {
    const LtOperand& o = *operands[i];
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&layouts[i], lt_type(o.dtype), static_cast<uint64_t>(o.rows),
                                            static_cast<uint64_t>(o.cols), o.ld));
    if (p.batch > 1) {
      const int32_t count = p.batch;
      CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(layouts[i], CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count));
      CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(layouts[i], CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &o.stride,
                                                    sizeof o.stride));
    }
  }

  const AlgoKey key = {m, n, k, static_cast<int64_t>(p.a.dtype), static_cast<int64_t>(p.b.dtype),
                       static_cast<int64_t>(p.d.dtype), p.trans_a, p.trans_b, p.a.ld, p.b.ld, p.d.ld, p.batch,
                       p.a.stride, p.b.stride, p.d.stride, epilogue, compute, pointer_mode, p.a_scale != nullptr,
                       p.b_scale != nullptr, align_a, align_b, align_d, p.bias ? alignment_of(p.bias) : 0,
                       static_cast<int64_t>(workspace_bytes)};
  auto found = algos.find(key);
  if (found == algos.end()) {
    CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    const uint64_t max_workspace = workspace_bytes;
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &max_workspace,
                                                      sizeof max_workspace));
    const struct {
      cublasLtMatmulPreferenceAttributes_t attr;
      uint32_t bytes;
    } alignments[] = {{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, align_a},
                      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, align_b},
                      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, align_d},
                      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, align_d}};
    for (const auto& a : alignments)
      CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, a.attr, &a.bytes, sizeof a.bytes));
    cublasLtMatmulHeuristicResult_t result{};
    int returned = 0;
    CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(handle, desc, layouts[0], layouts[1], layouts[2], layouts[2], pref, 1,
                                                &result, &returned));
    GPT_CHECK(returned > 0, "matmul {}: cuBLASLt has no algorithm for this product", what());
    found = algos.emplace(key, result.algo).first;
  }
  const void* alpha = p.device_scalars ? static_cast<const void*>(p.device_scalars) : &p.alpha;
  const void* beta = p.device_scalars ? static_cast<const void*>(p.device_scalars + 1) : &p.beta;
  CUBLAS_CHECK(cublasLtMatmul(handle, desc, alpha, p.a.data, layouts[0], p.b.data, layouts[1], beta, p.d.data,
                              layouts[2], const_cast<void*>(p.d.data), layouts[2], &found->second, workspace(),
                              workspace_bytes, stream));
}

namespace {

struct MatrixShape {
  int64_t rows, cols;
};

MatrixShape as_matrix(const Tensor& t, const char* name) {
  GPT_CHECK(!t.empty() && t.ndim >= 1, "matmul: {} must be a tensor of rank >= 1", name);
  const int64_t cols = t.dim(-1);
  GPT_CHECK(cols > 0, "matmul: {} {} has no columns", name, t.shape_string());
  return {t.numel() / cols, cols};
}

// Rows [begin, begin + count) of t seen as a [count, last dimension] matrix.
Tensor rows_of(const Tensor& t, int64_t begin, int64_t count) {
  const int64_t cols = t.dim(-1);
  return t.elements(begin * cols, count * cols).reshaped({count, cols});
}

const float* scale_inv_of(const Tensor& t) { return t.scaling ? &t.scaling->scale_inv : nullptr; }

bool aligned_16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// The epilogue's bias format for a product of these operands (as they reach cuBLASLt) into out.
DType epilogue_bias_format(DType operands, DType out) {
  return is_fp8_format(operands) && out == DType::F32 ? DType::BF16 : out;
}

// Whether Gemm::matmul's cuBLASLt path below runs this product as given, by the rules it checks: the
// question it answers for the small products that have row_product to go to instead of failing.
bool cublaslt_takes(const MatmulArgs& args, int64_t m, int64_t n, int64_t k, int compute_capability) {
  const DType ta = args.a.dtype, tb = args.b.dtype, to = args.out.dtype;
  const bool fp8_a = is_fp8_format(ta), fp8_b = is_fp8_format(tb);
  DType operands = ta;
  if (fp8_a && fp8_b) {
    if (ta == DType::E5M2 && tb == DType::E5M2) return false;
    if (to != DType::BF16 && to != DType::F16 && to != DType::F32) return false;
    const int64_t k_lt = fp8_product_k(k, args.trans_a, args.trans_b);
    if (compute_capability < kMinFp8ComputeCapability || m % 16 != 0 || n % 16 != 0 || k_lt % 16 != 0) return false;
    if (!aligned_16(args.a.data) || !aligned_16(args.b.data) || !aligned_16(args.out.data)) return false;
    operands = DType::E4M3;
  } else if (fp8_a || fp8_b) {
    operands = fp8_a ? tb : ta;
    if (!is_16bit(operands)) return false;
  } else if (ta != tb || (ta != DType::F32 && !is_16bit(ta))) {
    return false;
  }
  if (!is_fp8_format(operands) && !(to == operands || (is_16bit(operands) && to == DType::F32))) return false;
  const size_t staged = matmul_staging({ta, tb, m, n, k, args.trans_a, args.trans_b}).bytes;
  if (staged > 0 && (args.staging.empty() || args.staging.bytes() < staged || !aligned_16(args.staging.data)))
    return false;
  return args.bias.empty() || args.bias.dtype == epilogue_bias_format(operands, to) || to == DType::F32;
}

}  // namespace

void Gemm::matmul(const MatmulArgs& args, cudaStream_t stream) {
  State& s = *state_;
  const MatrixShape as = as_matrix(args.a, "a"), bs = as_matrix(args.b, "b"), os = as_matrix(args.out, "out");
  bool trans_a = args.trans_a, trans_b = args.trans_b;
  const int64_t m = trans_a ? as.cols : as.rows, k = trans_a ? as.rows : as.cols;
  const int64_t kb = trans_b ? bs.cols : bs.rows, n = trans_b ? bs.rows : bs.cols;
  GPT_CHECK(k == kb, "matmul: inner dimensions differ: op(a) is [{},{}] (a {}{}), op(b) is [{},{}] (b {}{})", m, k,
            args.a.shape_string(), trans_a ? " transposed" : "", kb, n, args.b.shape_string(), trans_b ? " transposed" : "");
  GPT_CHECK(os.rows == m && os.cols == n, "matmul: out {} should be [{},{}] (last dimension {}, leading ones folding to {})",
            args.out.shape_string(), m, n, n, m);
  GPT_CHECK(m <= INT_MAX && n <= INT_MAX && k <= INT_MAX, "matmul: [{},{}]x[{},{}] exceeds cuBLASLt's int range", m, k, k, n);
  if (!args.bias.empty())
    GPT_CHECK(args.bias.numel() == n, "matmul: bias {} should have {} elements (the output columns)", args.bias.shape_string(), n);
  const DType ta = args.a.dtype, tb = args.b.dtype, to = args.out.dtype;
  const Describe what = [&, trans_a = trans_a, trans_b = trans_b] {
    return fmt::format("[{},{}]x[{},{}] (a {} {}{}, b {} {}{}, out {})", m, k, k, n, dtype_name(ta), args.a.shape_string(),
                       trans_a ? " transposed" : "", dtype_name(tb), args.b.shape_string(), trans_b ? " transposed" : "",
                       dtype_name(to));
  };
  const auto refuse = [&](const char* why) {
    GPT_FAIL("matmul {}: {}. The CUDA backend multiplies F32 x F32 -> F32, BF16 x BF16 and F16 x F16 -> the same or "
             "F32, FP8 x FP8 (not E5M2 x E5M2) -> BF16, F16 or F32, and BF16/F16 x FP8 -> the 16-bit format or F32",
             what(), why);
  };
  if (m == 0 || n == 0) return;
  if (m <= kRowProductMaxRows && !cublaslt_takes(args, m, n, k, s.compute_capability)) {
    row_product(args, m, n, k, stream);
    return;
  }
  // FP8 rows off the 16-multiples (a batch of B*T rows, a prompt of T): cuBLASLt takes the rows up to the
  // last multiple of 16, row_product the rest. Each row of out is its own dot products, so the split only
  // changes the order of the tail rows' K-sums.
  if (is_fp8_format(ta) && is_fp8_format(tb) && !trans_a && m % 16 != 0) {
    const int64_t head = m - m % 16;
    MatmulArgs first = args, rest = args;
    first.a = rows_of(args.a, 0, head);
    first.out = rows_of(args.out, 0, head);
    rest.a = rows_of(args.a, head, m - head);
    rest.out = rows_of(args.out, head, m - head);
    if (cublaslt_takes(first, head, n, k, s.compute_capability)) {
      matmul(first, stream);
      row_product(rest, m - head, n, k, stream);
      return;
    }
  }

  MatrixView a{args.a.data, ta, as.rows, as.cols, as.cols}, b{args.b.data, tb, bs.rows, bs.cols, bs.cols};
  const MatrixView out{args.out.data, to, m, n, n};
  const MatmulStaging staged = matmul_staging({ta, tb, m, n, k, trans_a, trans_b});
  const size_t staging_bytes = args.staging.empty() ? 0 : args.staging.bytes();
  const auto staging_at = [&](size_t offset) -> void* {
    GPT_CHECK(staging_bytes >= staged.bytes,
              "matmul {}: its operand copies (transposes for cuBLASLt's TN-only FP8 products, or an FP8 operand "
              "widened to 16 bits) need {} bytes of MatmulArgs::staging, which has {}: pass a buffer sized by "
              "backend/matmul_staging.h (the model passes the activation plan's fp8.staging)",
              what(), staged.bytes, staging_bytes);
    GPT_CHECK(reinterpret_cast<uintptr_t>(args.staging.data) % 16 == 0,
              "matmul {}: MatmulArgs::staging must be 16-byte aligned for cuBLASLt; it is at {}", what(), args.staging.data);
    return static_cast<char*>(args.staging.data) + offset;
  };
  LtProduct p;
  const bool fp8_a = is_fp8_format(ta), fp8_b = is_fp8_format(tb);
  DType operands = ta;  // the format both operands reach cuBLASLt in
  if (fp8_a && fp8_b) {
    if (ta == DType::E5M2 && tb == DType::E5M2) refuse("cuBLASLt has no E5M2 x E5M2 product");
    if (to != DType::BF16 && to != DType::F16 && to != DType::F32) refuse("an FP8 product's output must be BF16, F16 or F32");
    GPT_CHECK(s.compute_capability >= kMinFp8ComputeCapability,
              "matmul {}: FP8 products need compute capability 8.9 or later; this device has {}.{}",
              what(), s.compute_capability / 10, s.compute_capability % 10);
    // Both operands copied (a weight gradient): the copies' K is padded with zeros (matmul_staging.h).
    const int64_t k_lt = fp8_product_k(k, trans_a, trans_b);
    GPT_CHECK(m % 16 == 0 && n % 16 == 0 && k_lt % 16 == 0,
              "matmul {}: cuBLASLt's FP8 products need N and K to be multiples of 16, and M too unless only the rows "
              "of a stored as is are off them; here M = {}, N = {}, K = {}", what(), m, n, k);
    for (const auto& [ptr, name] : {std::pair{args.a.data, "a"}, std::pair{args.b.data, "b"}, std::pair{args.out.data, "out"}})
      GPT_CHECK(reinterpret_cast<uintptr_t>(ptr) % 16 == 0, "matmul {}: FP8 products need 16-byte aligned operands; {} is at {}",
                what(), name, ptr);
    // TN: op(a) = a [M,K] and op(b) = b^T, b stored [N,K]; anything else goes through a transposed copy.
    if (trans_a) {
      void* t = staging_at(staged.a);
      transpose_bytes(t, k_lt, a.data, a.rows, a.cols, a.ld, stream);
      a = {t, ta, m, k_lt, k_lt};
      trans_a = false;
    }
    if (!trans_b) {
      void* t = staging_at(staged.b);
      transpose_bytes(t, k_lt, b.data, b.rows, b.cols, b.ld, stream);
      b = {t, tb, n, k_lt, k_lt};
      trans_b = true;
    }
    p = column_major(out, a, b, trans_a, trans_b);
    p.a_scale = scale_inv_of(args.b);
    p.b_scale = scale_inv_of(args.a);
    p.alpha = args.alpha;
    p.beta = args.beta;
    operands = DType::E4M3;
  } else if (fp8_a || fp8_b) {
    const DType wide = fp8_a ? tb : ta;
    if (!is_16bit(wide)) refuse("an FP8 operand pairs with FP8, BF16 or F16 only");
    MatrixView& narrow = fp8_a ? a : b;
    void* w = staging_at(fp8_a ? staged.a : staged.b);
    widen_fp8(w, wide, narrow.data, narrow.dtype, narrow.rows, narrow.cols, narrow.ld, stream);
    narrow = {w, wide, narrow.rows, narrow.cols, narrow.cols};
    operands = wide;
    p = column_major(out, a, b, trans_a, trans_b);
    fold_scales(s.scalars(), args.alpha, args.beta, fp8_a ? scale_inv_of(args.a) : nullptr,
                fp8_b ? scale_inv_of(args.b) : nullptr, stream);
    p.device_scalars = s.scalars();
  } else {
    if (ta != tb) refuse("the operands' formats differ");
    if (ta != DType::F32 && !is_16bit(ta)) refuse("unsupported operand format");
    p = column_major(out, a, b, trans_a, trans_b);
    p.alpha = args.alpha;
    p.beta = args.beta;
  }
  if (!is_fp8_format(operands) && !(to == operands || (is_16bit(operands) && to == DType::F32)))
    refuse("cuBLASLt writes a product of these operands in their own format or F32 only");

  bool bias_pass = false;
  if (!args.bias.empty()) {
    const DType epilogue_bias = epilogue_bias_format(operands, to);
    if (args.bias.dtype == epilogue_bias) {
      p.bias = args.bias.data;
    } else if (to == DType::F32) {
      bias_pass = true;
    } else {
      refuse(fmt::format("a {} output takes a {} bias (cuBLASLt's bias epilogue), not {}", dtype_name(to),
                         dtype_name(epilogue_bias), dtype_name(args.bias.dtype))
                 .c_str());
    }
  }
  s.run(p, what, stream);
  if (bias_pass) add_bias(static_cast<float*>(args.out.data), m, n, n, args.bias, stream);
}

void Gemm::batched_matmul(const BatchedMatmul& q, cudaStream_t stream) {
  const int64_t m = q.trans_a ? q.a.cols : q.a.rows, k = q.trans_a ? q.a.rows : q.a.cols;
  const int64_t kb = q.trans_b ? q.b.cols : q.b.rows, n = q.trans_b ? q.b.rows : q.b.cols;
  const Describe what = [&] {
    return fmt::format("batched {} x [{},{}]x[{},{}] (a {}{}, b {}{}, out {})", q.batch, m, k, kb, n, view_string(q.a),
                       q.trans_a ? " transposed" : "", view_string(q.b), q.trans_b ? " transposed" : "",
                       view_string(q.out));
  };
  GPT_CHECK(k == kb && q.out.rows == m && q.out.cols == n && q.batch >= 1, "matmul {}: shapes do not chain", what());
  GPT_CHECK(q.a.dtype == q.b.dtype && (q.a.dtype == DType::F32 || is_16bit(q.a.dtype)) &&
                (q.out.dtype == q.a.dtype || q.out.dtype == DType::F32),
            "matmul {}: batched products take F32, BF16 or F16 operands of one format, written in that format or F32",
            what());
  if (m == 0 || n == 0) return;
  LtProduct p = column_major(q.out, q.a, q.b, q.trans_a, q.trans_b);
  p.batch = q.batch;
  p.alpha = q.alpha;
  p.beta = q.beta;
  state_->run(p, what, stream);
}

}  // namespace gpt::cuda
