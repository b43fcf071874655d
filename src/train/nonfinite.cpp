#include "train/nonfinite.h"

#include "precision/float_formats.h"

#include <fmt/format.h>

#include <cmath>
#include <optional>
#include <vector>

namespace gpt {
namespace {

// Whether element i of a host copy of a floating-point tensor is NaN or Inf, and which: every format's
// codes decode exactly (float_formats.h), so the decoded value is non-finite exactly when the code is.
std::optional<const char*> nonfinite_at(const std::vector<unsigned char>& bytes, DType dtype, size_t i) {
  if (dtype != DType::F32 && dtype != DType::F64 && !is_narrow_float(dtype)) return std::nullopt;
  const double v = decode_element(dtype, bytes.data(), i);
  if (std::isfinite(v)) return std::nullopt;
  return std::isnan(v) ? "nan" : "inf";
}

}  // namespace

std::string describe_nonfinite_step(double loss, double grad_norm, GPT& model) {
  std::string out = fmt::format("loss is {}, gradient norm is {}", loss, grad_norm);
  const auto& specs = model.parameter_layout().specs();
  std::string first;
  size_t bad_tensors = 0;
  for (size_t t = 0; t < specs.size(); ++t) {
    const Tensor g = model.gradient_arena().tensor(t);
    std::vector<unsigned char> host(g.bytes());
    model.backend().copy_to_host(host.data(), g.data, g.bytes());
    const auto n = static_cast<size_t>(g.numel());
    for (size_t i = 0; i < n; ++i) {
      const auto what = nonfinite_at(host, g.dtype, i);
      if (!what) continue;
      ++bad_tensors;
      if (first.empty()) {
        const std::string& name = specs[t].name;
        const int layers = model.config().n_layer;
        // Per-block tensors are stacked [L, ...]; the embeddings and the final LayerNorm are not.
        const bool per_layer = g.ndim >= 1 && g.dim(0) == layers && name.rfind("wte", 0) != 0 &&
                               name.rfind("wpe", 0) != 0 && name.rfind("lnf", 0) != 0;
        first = per_layer ? fmt::format("{}, layer {} (element {} is {})", name, i / (n / static_cast<size_t>(layers)),
                                        i, *what)
                          : fmt::format("{} (element {} is {})", name, i, *what);
      }
      break;
    }
  }
  if (first.empty()) return out + "; every gradient element is finite (the loss itself overflowed)";
  return out + fmt::format("; first non-finite gradient: {}; {} of {} gradient tensors hold NaN/Inf", first,
                           bad_tensors, specs.size());
}

}  // namespace gpt
