#include "cpu/onednn_matmul.h"

#include "cpu/bf16_elements.h"
#include "precision/float_formats.h"

#include <oneapi/dnnl/dnnl.hpp>

#include <array>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <tuple>
#include <unordered_map>

#include <fmt/format.h>

namespace gpt::cpu {
namespace {

using dt = dnnl::memory::data_type;

bool bf16_or_fp8(DType t) { return t == DType::BF16 || t == DType::E4M3 || t == DType::E5M2; }

dt onednn_type(DType t) {
  switch (t) {
    case DType::F32: return dt::f32;
    case DType::BF16: return dt::bf16;
    default: GPT_FAIL("oneDNN matmul: no oneDNN type for {} here", dtype_name(t));
  }
}

const char* isa_name(dnnl::cpu_isa isa) {
  switch (isa) {
    case dnnl::cpu_isa::sse41: return "sse41";
    case dnnl::cpu_isa::avx: return "avx";
    case dnnl::cpu_isa::avx2: return "avx2";
    case dnnl::cpu_isa::avx2_vnni: return "avx2_vnni";
    case dnnl::cpu_isa::avx512_core: return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni: return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16: return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx: return "avx512_core_amx";
    default: return "other";
  }
}

// The kernels chosen so far, process-wide (the bench reports them after its steps).
std::mutex kernels_mutex;
std::set<std::string>& kernels_used() {
  static std::set<std::string> used;
  return used;
}

// E4M3/E5M2 code -> the BF16 code of the same value (exact: at most 3 mantissa bits, exponents inside BF16's).
template <class Fmt>
const std::array<uint16_t, 256>& bf16_table() {
  static const std::array<uint16_t, 256> table = [] {
    std::array<uint16_t, 256> t{};
    for (int c = 0; c < 256; ++c) t[c] = static_cast<uint16_t>(f32_bits(Fmt::decode(static_cast<uint8_t>(c))) >> 16);
    return t;
  }();
  return table;
}

void fp8_to_bf16(const Tensor& t, uint16_t* out) {
  const uint16_t* table = t.dtype == DType::E4M3 ? bf16_table<E4m3Format>().data() : bf16_table<E5m2Format>().data();
  const auto* codes = t.as<uint8_t>();
  const int64_t n = t.numel();
#pragma omp parallel for schedule(static) if (n > (1 << 18))
  for (int64_t i = 0; i < n; ++i) out[i] = table[codes[i]];
}

// The FP32 accumulator of a scaled [m, n] product at the start of the scratch, rounded up to 64 bytes so
// that oneDNN's scratchpad after it stays aligned.
size_t accumulator_bytes(int64_t m, int64_t n) { return (static_cast<size_t>(m * n) * sizeof(float) + 63) / 64 * 64; }

// out[m, n] = alpha acc + beta out + bias, in FP32, stored in out's element type E (BF16 rounded once);
// B is the bias's (no bias: null). The order is that of oneDNN's own epilogue: the output scale, the
// sum post-op, then the bias.
template <class E, class B>
void scaled_epilogue_kernel(E* out, const float* acc, const B* bias, int64_t m, int64_t n, float alpha, float beta) {
#pragma omp parallel for schedule(static) if (m * n > (1 << 16))
  for (int64_t i = 0; i < m; ++i) {
    E* row = out + i * n;
    const float* a = acc + i * n;
    for (int64_t j = 0; j < n; ++j) {
      float v = alpha * a[j];
      if (beta != 0.0f) v += beta * widen(row[j]);
      if (bias) v += widen(bias[j]);
      row[j] = stored_as<E>(v);
    }
  }
}

template <class E>
void scaled_epilogue_as(E* out, const float* acc, const Tensor& bias, int64_t m, int64_t n, float alpha, float beta) {
  if (bias.empty()) scaled_epilogue_kernel(out, acc, static_cast<const float*>(nullptr), m, n, alpha, beta);
  else if (bias.dtype == DType::BF16) scaled_epilogue_kernel(out, acc, bias.as<Bf16>(), m, n, alpha, beta);
  else scaled_epilogue_kernel(out, acc, bias.as<float>(), m, n, alpha, beta);
}

void scaled_epilogue(void* out, DType out_dtype, const float* acc, const Tensor& bias, int64_t m, int64_t n, float alpha,
                     float beta) {
  if (out_dtype == DType::BF16) scaled_epilogue_as(static_cast<Bf16*>(out), acc, bias, m, n, alpha, beta);
  else scaled_epilogue_as(static_cast<float*>(out), acc, bias, m, n, alpha, beta);
}

dnnl::memory::desc matrix_desc(int64_t rows, int64_t cols, DType dtype, bool trans, int64_t ld) {
  // A transposed operand is the row-major [cols, rows] matrix read down its columns.
  const dnnl::memory::dims strides = trans ? dnnl::memory::dims{1, ld} : dnnl::memory::dims{ld, 1};
  return dnnl::memory::desc({rows, cols}, onednn_type(dtype), strides);
}

}  // namespace

OnednnInfo onednn_info() {
  OnednnInfo info;
  const dnnl_version_t* v = dnnl_version();
  info.version = fmt::format("{}.{}.{}", v->major, v->minor, v->patch);
  const dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
  info.isa = isa_name(isa);
  // The ISA values are bit sets, each containing the ones below it.
  const auto bits = static_cast<unsigned>(isa), bf16 = static_cast<unsigned>(dnnl::cpu_isa::avx512_core_bf16);
  info.native_bf16 = (bits & bf16) == bf16;
  return info;
}

std::string narrow_matmul_description(bool exact) {
  const OnednnInfo info = onednn_info();
  if (info.native_bf16 && !exact) {
    return fmt::format("BF16 and FP8 operands: oneDNN {} BF16 matmul ({}); F16 (no oneDNN F16 matmul on CPUs in this "
                       "version) and mixed F32: decoded to FP32 for the BLAS",
                       info.version, info.isa);
  }
  if (info.native_bf16) {
    return fmt::format("decoded to FP32 in the workspace for the BLAS (precision.cpu_narrow_matmul: exact; oneDNN {} "
                       "sees {}, native BF16)",
                       info.version, info.isa);
  }
  return fmt::format("decoded to FP32 in the workspace for the BLAS (oneDNN {} sees {}: no native BF16, so its BF16 "
                     "matmul would not be faster)",
                     info.version, info.isa);
}

std::vector<std::string> onednn_kernels_used() {
  std::lock_guard<std::mutex> lock(kernels_mutex);
  return {kernels_used().begin(), kernels_used().end()};
}

struct OnednnMatmul::State {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  // shape, leading dimensions, transposes, formats, bias format (F64 for none), beta
  using Key = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, bool, bool, DType, DType, DType, DType, float>;
  struct Entry {
    dnnl::matmul::primitive_desc pd;
    dnnl::matmul primitive;
    size_t scratch_bytes = 0;
  };
  std::map<Key, std::optional<Entry>> cache;  // nullopt: only the reference implementation
};

OnednnMatmul::OnednnMatmul() : state_(std::make_unique<State>()) {}
OnednnMatmul::~OnednnMatmul() = default;

const void* OnednnMatmul::primitive_for(int64_t m, int64_t n, int64_t k, const OnednnOperand& a, const OnednnOperand& b,
                                        DType out_dtype, const Tensor& bias, float beta, size_t scratch_bytes) {
  State& s = *state_;
  const DType bias_dtype = bias.empty() ? DType::F64 : bias.dtype;
  const State::Key key{m, n, k, a.ld, b.ld, a.trans, b.trans, a.dtype, b.dtype, out_dtype, bias_dtype, beta};
  auto it = s.cache.find(key);
  if (it == s.cache.end()) {
    const dnnl::memory::desc a_md = matrix_desc(m, k, a.dtype, a.trans, a.ld);
    const dnnl::memory::desc b_md = matrix_desc(k, n, b.dtype, b.trans, b.ld);
    const dnnl::memory::desc c_md = matrix_desc(m, n, out_dtype, false, n);
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    dnnl::post_ops ops;
    if (beta != 0.0f) ops.append_sum(beta);
    if (!bias.empty()) ops.append_binary(dnnl::algorithm::binary_add, matrix_desc(1, n, bias.dtype, false, n));
    attr.set_post_ops(ops);
    std::optional<State::Entry> entry;
    try {
      const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, b_md, c_md), attr, s.engine);
      const std::string impl = pd.impl_info_str();
      if (impl.rfind("ref", 0) != 0) {
        entry = State::Entry{pd, dnnl::matmul(pd), pd.scratchpad_desc().get_size()};
        std::lock_guard<std::mutex> lock(kernels_mutex);
        kernels_used().insert(impl);
      }
    } catch (const dnnl::error& e) {
      // unimplemented: this CPU or version has no matmul for these formats; the FP32 path takes it
      GPT_CHECK(e.status == dnnl_unimplemented, "oneDNN matmul [{}x{}]x[{}x{}]: {}", m, k, k, n, e.what());
    }
    it = s.cache.emplace(key, std::move(entry)).first;
  }
  if (!it->second || it->second->scratch_bytes > scratch_bytes) return nullptr;
  return &*it->second;
}

const void* OnednnMatmul::primitive_for_product(int64_t m, int64_t n, int64_t k, const OnednnOperand& a,
                                                const OnednnOperand& b, DType out_dtype, const Tensor& bias, float alpha,
                                                float beta, size_t scratch_bytes) {
  if (alpha == 1.0f) return primitive_for(m, n, k, a, b, out_dtype, bias, beta, scratch_bytes);
  const size_t acc_bytes = accumulator_bytes(m, n);
  if (acc_bytes > scratch_bytes) return nullptr;
  return primitive_for(m, n, k, a, b, DType::F32, Tensor(), 0.0f, scratch_bytes - acc_bytes);
}

void OnednnMatmul::execute(const void* primitive, const OnednnOperand& a, const OnednnOperand& b, void* out, const Tensor& bias,
                           float beta, void* scratch) {
  State& s = *state_;
  const State::Entry& entry = *static_cast<const State::Entry*>(primitive);
  const dnnl::matmul::primitive_desc& pd = entry.pd;
  auto mem = [&](const dnnl::memory::desc& md, const void* p) { return dnnl::memory(md, s.engine, const_cast<void*>(p)); };
  std::unordered_map<int, dnnl::memory> args{
      {DNNL_ARG_SRC, mem(pd.src_desc(), a.data)},
      {DNNL_ARG_WEIGHTS, mem(pd.weights_desc(), b.data)},
      {DNNL_ARG_DST, mem(pd.dst_desc(), out)},
      {DNNL_ARG_SCRATCHPAD, mem(pd.scratchpad_desc(), scratch)},
  };
  if (!bias.empty()) {
    const int64_t n = bias.numel();
    const int index = beta != 0.0f ? 1 : 0;
    args.emplace(DNNL_ARG_ATTR_MULTIPLE_POST_OP(index) | DNNL_ARG_SRC_1, mem(matrix_desc(1, n, bias.dtype, false, n), bias.data));
  }
  entry.primitive.execute(s.stream, args);
  s.stream.wait();
}

bool OnednnMatmul::run(int64_t m, int64_t n, int64_t k, const OnednnOperand& a, const OnednnOperand& b, void* out,
                       DType out_dtype, const Tensor& bias, float alpha, float beta, void* scratch, size_t scratch_bytes) {
  const void* primitive = primitive_for_product(m, n, k, a, b, out_dtype, bias, alpha, beta, scratch_bytes);
  if (!primitive) return false;
  if (alpha == 1.0f) {
    execute(primitive, a, b, out, bias, beta, scratch);
    return true;
  }
  auto* acc = static_cast<float*>(scratch);
  execute(primitive, a, b, acc, Tensor(), 0.0f, static_cast<char*>(scratch) + accumulator_bytes(m, n));
  scaled_epilogue(out, out_dtype, acc, bias, m, n, alpha, beta);
  return true;
}

bool OnednnMatmul::try_run(const MatmulArgs& args, const GemmShape2D& shape, MatmulWorkspace& workspace) {
  if (!bf16_or_fp8(args.a.dtype) || !bf16_or_fp8(args.b.dtype)) return false;
  if (args.out.dtype != DType::F32 && args.out.dtype != DType::BF16) return false;
  if (!args.bias.empty() && args.bias.dtype != DType::F32 && args.bias.dtype != DType::BF16) return false;
  if (args.out.dtype == DType::BF16 && args.out.scaling) return false;
  // The FP8 operands' BF16 copies first in the workspace, then oneDNN's scratchpad.
  const size_t a_bytes = args.a.dtype == DType::BF16 ? 0 : static_cast<size_t>(args.a.numel()) * 2;
  const size_t b_bytes = args.b.dtype == DType::BF16 ? 0 : static_cast<size_t>(args.b.numel()) * 2;
  const size_t copies = (a_bytes + 63) / 64 * 64 + (b_bytes + 63) / 64 * 64;
  if (copies > workspace.capacity_bytes()) return false;
  const OnednnOperand a_in{nullptr, DType::BF16, args.trans_a, shape.lda}, b_in{nullptr, DType::BF16, args.trans_b, shape.ldb};
  if (!primitive_for_product(shape.m, shape.n, shape.k, a_in, b_in, args.out.dtype, args.bias, args.alpha, args.beta,
                             workspace.capacity_bytes() - copies))
    return false;
  auto* base = static_cast<char*>(workspace.data());
  const void* a = args.a.data;
  const void* b = args.b.data;
  if (a_bytes) {
    fp8_to_bf16(args.a, reinterpret_cast<uint16_t*>(base));
    a = base;
  }
  if (b_bytes) {
    fp8_to_bf16(args.b, reinterpret_cast<uint16_t*>(base + (a_bytes + 63) / 64 * 64));
    b = base + (a_bytes + 63) / 64 * 64;
  }
  return run(shape.m, shape.n, shape.k, {a, DType::BF16, args.trans_a, shape.lda}, {b, DType::BF16, args.trans_b, shape.ldb},
             args.out.data, args.out.dtype, args.bias, args.alpha, args.beta, base + copies, workspace.capacity_bytes() - copies);
}

}  // namespace gpt::cpu
