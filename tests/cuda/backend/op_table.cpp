#include "cuda/backend/op_table.h"

#include "precision/float_formats.h"

#include <cmath>
#include <cstring>
#include <random>

namespace gpt::test {

namespace {
enum Role { kInput = 0, kOutput = 1, kAccumulated = 2, kScratch = 3 };
}

struct OpBench::Held {
  Backend* backend = nullptr;
  void* data = nullptr;
  size_t bytes = 0;
  Tensor tensor;
  int role = kInput;
  bool is_meta = false;
  double error_scale = 0.0;
  ~Held() {
    if (data) backend->deallocate(data);
  }
};

OpBench::OpBench(Backend& backend, uint64_t seed) : backend_(backend), seed_(seed) {}
OpBench::~OpBench() = default;

std::string format_tag(DType dtype) { return std::string(dtype_name(dtype)); }

Tensor OpBench::make(std::initializer_list<int64_t> shape, DType dtype, int role) {
  auto h = std::make_unique<Held>();
  h->backend = &backend_;
  Tensor t(nullptr, shape, dtype, backend_.device());
  h->bytes = std::max<size_t>(t.bytes(), 1);
  h->data = backend_.allocate(h->bytes);
  t.data = h->data;
  h->tensor = t;
  h->role = role;
  std::vector<unsigned char> poison(h->bytes, 0xFF);
  backend_.copy_to_device(h->data, poison.data(), h->bytes);
  held_.push_back(std::move(h));
  return t;
}

namespace {

void encode_into(DType dtype, const std::vector<double>& values, std::vector<unsigned char>& bytes) {
  const size_t n = values.size();
  bytes.assign(n * dtype_size(dtype), 0);
  for (size_t i = 0; i < n; ++i) {
    const double v = values[i];
    switch (dtype) {
      case DType::F32: { const float f = static_cast<float>(v); std::memcpy(&bytes[4 * i], &f, 4); break; }
      case DType::F64: std::memcpy(&bytes[8 * i], &v, 8); break;
      case DType::BF16: { const uint16_t c = f64_to_bf16(v); std::memcpy(&bytes[2 * i], &c, 2); break; }
      case DType::F16: { const uint16_t c = f64_to_f16(v); std::memcpy(&bytes[2 * i], &c, 2); break; }
      case DType::E4M3: bytes[i] = f64_to_e4m3(v); break;
      case DType::E5M2: bytes[i] = f64_to_e5m2(v); break;
      default: GPT_FAIL("op table: no random values for dtype {}", dtype_name(dtype));
    }
  }
}

}  // namespace

Tensor OpBench::input(std::initializer_list<int64_t> shape, DType dtype, float lo, float hi) {
  Tensor t = make(shape, dtype, kInput);
  std::mt19937_64 rng(seed_ * 1000003u + held_.size());
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> values(static_cast<size_t>(t.numel()));
  for (double& v : values) v = dist(rng);
  std::vector<unsigned char> bytes;
  encode_into(dtype, values, bytes);
  backend_.copy_to_device(t.data, bytes.data(), bytes.size());
  return t;
}

Tensor OpBench::tokens(std::initializer_list<int64_t> shape, int vocab, int ignore_every) {
  Tensor t = make(shape, DType::I32, kInput);
  std::mt19937_64 rng(seed_ * 1000003u + held_.size());
  std::uniform_int_distribution<int32_t> dist(0, vocab - 1);
  std::vector<int32_t> values(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < values.size(); ++i)
    values[i] = ignore_every > 0 && i % static_cast<size_t>(ignore_every) == 1 ? -1 : dist(rng);
  backend_.copy_to_device(t.data, values.data(), values.size() * 4);
  return t;
}

Tensor OpBench::output(std::initializer_list<int64_t> shape, DType dtype, double error_scale) {
  const Tensor t = make(shape, dtype, kOutput);
  held_.back()->error_scale = error_scale;
  return t;
}

Tensor OpBench::accumulated(std::initializer_list<int64_t> shape, DType dtype, float lo, float hi) {
  Tensor t = input(shape, dtype, lo, hi);
  held_.back()->role = kAccumulated;
  return t;
}

Tensor OpBench::scratch(std::initializer_list<int64_t> shape, DType dtype) { return make(shape, dtype, kScratch); }

Fp8Meta* OpBench::fp8_meta(float scale) {
  Tensor t = make({5}, DType::F32, kOutput);
  held_.back()->is_meta = true;
  Fp8Meta meta;
  meta.scale = scale;
  meta.scale_inv = 1.0f / scale;
  backend_.copy_to_device(t.data, &meta, sizeof meta);
  return static_cast<Fp8Meta*>(t.data);
}

std::vector<OpBench::Result> OpBench::results() {
  backend_.synchronize();
  std::vector<Result> out;
  int outputs = 0, metas = 0;
  for (const auto& h : held_) {
    if (h->role != kOutput && h->role != kAccumulated) continue;
    std::vector<unsigned char> bytes(h->bytes);
    backend_.copy_to_host(bytes.data(), h->data, h->bytes);
    Result r;
    if (h->is_meta) {
      Fp8Meta m;
      std::memcpy(&m, bytes.data(), sizeof m);
      r.name = fmt::format("fp8 state {} (scale, scale_inv, amax, underflows, saturated)", metas++);
      r.values = {m.scale, m.scale_inv, m.amax, static_cast<double>(m.underflows), static_cast<double>(m.saturated)};
    } else {
      r.name = fmt::format("output {} ({} {})", outputs++, dtype_name(h->tensor.dtype), h->tensor.shape_string());
      r.dtype = h->tensor.dtype;
      r.error_scale = h->error_scale;
      const auto n = static_cast<size_t>(h->tensor.numel());
      r.values.resize(n);
      for (size_t i = 0; i < n; ++i) {
        if (r.dtype == DType::I32) {
          int32_t v;
          std::memcpy(&v, bytes.data() + 4 * i, 4);
          r.values[i] = v;
        } else {
          r.values[i] = decode_element(r.dtype, bytes.data(), i);
        }
      }
    }
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<OpCase>& op_cases() {
  static std::vector<OpCase> cases;
  return cases;
}

OpCases::OpCases(std::vector<OpCase> cases) {
  for (auto& c : cases) op_cases().push_back(std::move(c));
}

}  // namespace gpt::test
