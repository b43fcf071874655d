// Whether this build's kernels run on a device, decided from its compute capability before anything is
// allocated, so that a GPU the backend cannot use is one clear line at start (and train.backend auto
// trains on the CPU instead), not a "no kernel image" error from inside the first op.
//
// Two facts decide it:
// - what CUDA 13 compiles for: Turing (compute capability 7.5) and later; Volta, Pascal and Maxwell are
//   gone from its compiler and drivers. On Turing the fused attention takes its FP32 kernels (its
//   tensor-core ones need Ampere's cp.async and BF16 mma.sync, 8.0) and the BF16 products have no tensor
//   cores (cuda_backend_factory.cpp warns); FP8 tensor-core products are Ada's and Hopper's (8.9).
// - the code the build holds (CMAKE_CUDA_ARCHITECTURES): machine code (SASS) for sm_XY runs on devices
//   of compute capability X.Z with Z >= Y; PTX for compute_XY is compiled by the driver at first use for
//   any device of compute capability X.Y or later. An entry "XY" holds both, "XY-real" the SASS only,
//   "XY-virtual" the PTX only (CMake's spelling). "native", "all" and "all-major" are not known from the
//   list; for them only the runtime probe (cuda_entry.cu) decides.
#pragma once

#include <string>
#include <string_view>

namespace gpt::cuda {

// The oldest compute capability (major * 10 + minor) the CUDA backend's kernels run on: Turing.
constexpr int kMinComputeCapability = 75;
// The oldest with BF16 tensor cores and the fused attention's tensor-core kernels: Ampere.
constexpr int kMinBf16TensorCoreCapability = 80;
// The oldest with FP8 tensor cores (cuBLASLt's E4M3/E5M2 products): Ada, Hopper, Blackwell.
constexpr int kMinFp8ComputeCapability = 89;

struct DeviceSupport {
  enum class Code { Native, CompiledAtFirstUse, Unknown, Unsupported };
  Code code = Code::Unknown;
  // Unsupported: why, and what to do, as the rest of a sentence that names the device. CompiledAtFirstUse:
  // what the user should know (the driver compiles the PTX once). Empty otherwise.
  std::string detail;
  bool runs() const { return code != Code::Unsupported; }
};

// compute_capability: major * 10 + minor (86 for 8.6, 120 for 12.0). architectures: the build's
// CMAKE_CUDA_ARCHITECTURES, entries separated by ';' or ','.
DeviceSupport device_support(int compute_capability, std::string_view architectures);

// The architectures this binary was built for (the compile definition GPT_CUDA_ARCHITECTURES), as
// device_support takes them.
std::string_view built_architectures();

// "8.6" for 86.
std::string compute_capability_text(int compute_capability);

// Device `index` as this build sees it: device_support from its compute capability, then, where that
// allows it, the driver's own answer (cudaFuncGetAttributes on a kernel of ours: no kernel image, or not).
// Implemented in cuda_entry.cu; the probe makes the device current for a moment and so creates its context.
struct DeviceCheck {
  int index = 0;
  std::string name;
  int compute_capability = 0;
  DeviceSupport support;
  // "device 0 (Tesla T4, compute capability 7.5)"
  std::string device() const;
  // "device 0 (...) cannot run the CUDA backend: " and why: the refusal train.backend cuda stops with and
  // train.backend auto warns with.
  std::string refusal() const;
  // What the backend does without on a device it runs on slowly (Turing: no BF16 tensor cores, the fused
  // attention off its tensor-core kernels), as the warning make_backend logs; "" from Ampere on.
  std::string limits() const;
};
DeviceCheck check_device(int index);

}  // namespace gpt::cuda
