#include "backend/device_support.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <optional>

#ifndef GPT_CUDA_ARCHITECTURES
#error "GPT_CUDA_ARCHITECTURES (the build's CMAKE_CUDA_ARCHITECTURES) must be defined by cmake/Cuda.cmake"
#endif

namespace gpt::cuda {
namespace {

// One entry of CMAKE_CUDA_ARCHITECTURES: "86", "90-real", "80-virtual", "90a".
struct Architecture {
  int number = 0;
  bool sass = true;
  bool ptx = true;
  bool exact = false;  // "90a": code for that compute capability only, neither later minors nor majors
};

std::optional<Architecture> parse_architecture(std::string_view entry) {
  Architecture a;
  size_t i = 0;
  while (i < entry.size() && std::isdigit(static_cast<unsigned char>(entry[i]))) a.number = a.number * 10 + (entry[i++] - '0');
  if (i == 0 || a.number == 0) return std::nullopt;
  if (i < entry.size() && (entry[i] == 'a' || entry[i] == 'f')) a.exact = entry[i++] == 'a';
  const std::string_view suffix = entry.substr(i);
  if (suffix == "-real") {
    a.ptx = false;
  } else if (suffix == "-virtual") {
    a.sass = false;
  } else if (!suffix.empty()) {
    return std::nullopt;
  }
  return a;
}

std::string_view trimmed(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

}  // namespace

std::string compute_capability_text(int compute_capability) {
  return fmt::format("{}.{}", compute_capability / 10, compute_capability % 10);
}

std::string DeviceCheck::device() const {
  return fmt::format("device {} ({}, compute capability {})", index, name, compute_capability_text(compute_capability));
}

std::string DeviceCheck::refusal() const { return device() + " cannot run the CUDA backend: " + support.detail; }

std::string DeviceCheck::limits() const {
  if (compute_capability >= kMinBf16TensorCoreCapability) return "";
  return fmt::format("{} is older than Ampere: its tensor cores multiply F16, not BF16, so precision.recipe: fp16 "
                     "runs its products there and bf16's run without them (cuBLASLt, several times slower); the fused "
                     "attention takes its FP32-arithmetic kernels (cp.async and the BF16 mma need {})",
                     device(), compute_capability_text(kMinBf16TensorCoreCapability));
}

std::string_view built_architectures() { return GPT_CUDA_ARCHITECTURES; }

DeviceSupport device_support(int compute_capability, std::string_view architectures) {
  using Code = DeviceSupport::Code;
  if (compute_capability < kMinComputeCapability)
    return {Code::Unsupported,
            fmt::format("it needs compute capability {} or later (Turing, Ampere, Ada, Hopper, Blackwell): CUDA "
                        "13, which gpt-train is built with, compiles for nothing older (Volta, Pascal and Maxwell "
                        "left it); train.backend: cpu trains on this machine's CPU",
                        compute_capability_text(kMinComputeCapability))};
  const int major = compute_capability / 10, minor = compute_capability % 10;
  const auto runs = [&](const Architecture& a) {
    return a.exact ? a.number == compute_capability : a.number / 10 == major && a.number % 10 <= minor;
  };
  bool unknown = false;
  std::optional<int> newest_ptx;
  std::string list;
  size_t start = 0;
  while (start <= architectures.size()) {
    const size_t end = std::min(architectures.find_first_of(";,", start), architectures.size());
    const std::string_view entry = trimmed(architectures.substr(start, end - start));
    start = end + 1;
    if (entry.empty()) continue;
    list += (list.empty() ? "" : ";") + std::string(entry);
    const std::optional<Architecture> a = parse_architecture(entry);
    if (!a) {
      unknown = true;  // native, all, all-major: what they hold depends on the machine that built it
      continue;
    }
    if (a->sass && runs(*a)) return {Code::Native, ""};
    const bool ptx_runs = a->exact ? a->number == compute_capability : a->number <= compute_capability;
    if (a->ptx && ptx_runs && (!newest_ptx || a->number > *newest_ptx)) newest_ptx = a->number;
  }
  if (unknown) return {Code::Unknown, ""};
  if (newest_ptx)
    return {Code::CompiledAtFirstUse,
            fmt::format("this gpt-train holds no machine code for compute capability {}, so the driver compiles its "
                        "compute_{} PTX at the first launch of each kernel (once: the driver caches it); "
                        "-DCMAKE_CUDA_ARCHITECTURES={} builds machine code for this GPU",
                        compute_capability_text(compute_capability), *newest_ptx, compute_capability)};
  return {Code::Unsupported,
          fmt::format("this gpt-train was built for CUDA architectures {} (CMAKE_CUDA_ARCHITECTURES), none of whose "
                      "code runs on compute capability {}: rebuild with scripts/build.sh "
                      "-DCMAKE_CUDA_ARCHITECTURES={}",
                      list.empty() ? "(none)" : list, compute_capability_text(compute_capability), compute_capability)};
}

}  // namespace gpt::cuda
