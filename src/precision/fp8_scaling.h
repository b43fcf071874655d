// Per-tensor FP8 scaling state, after Transformer Engine's recipes. A tensor x is stored as
// q = convert(x * scale) and read back as q * scale_inv, scale_inv = 1 / scale; the scale maps the
// tensor's amax (max |x|) onto the format's range:
//
//   scale = (fp8_max / amax) / 2^margin
//
// kept at its previous value when amax is 0 or not finite, and clamped to FLT_MAX when the quotient
// overflows FP32 (a tiny amax), exactly as TE's _default_sf_compute.
//
//   delayed (DelayedScaling): the step quantises with the scale computed after the previous step; then
//     update(amax) records the step's amax in a window of the last amax_history amaxes and recomputes
//     the scale from the window's max (algorithm max) or from the newest amax (most_recent). A non-finite
//     amax in the window keeps the scale where it was until it leaves the window (TE does the same).
//   current (Float8CurrentScaling): set_current(amax) takes the scale from the tensor's own amax right
//     before it is quantised; it costs an extra pass (or, on a GPU, a reduction before the cast).
//
// fp8_max is that of the tensor's format: 448 for E4M3 (forward activations and weights), 57344 for E5M2
// (gradients in the hybrid recipe). Fp8ScalingTable holds the states of a model's FP8 tensors and
// serialises them for checkpoints.
#pragma once

#include "core/dtype.h"
#include "precision/fp8_scale_rule.h"

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace gpt {

enum class Fp8ScalingMode { Delayed, Current };
enum class AmaxAlgorithm { Max, MostRecent };

std::string_view fp8_scaling_mode_name(Fp8ScalingMode mode);
Fp8ScalingMode parse_fp8_scaling_mode(std::string_view name);  // "delayed" | "current"
std::string_view amax_algorithm_name(AmaxAlgorithm algorithm);
AmaxAlgorithm parse_amax_algorithm(std::string_view name);     // "max" | "most_recent"

struct Fp8ScalingConfig {
  Fp8ScalingMode mode = Fp8ScalingMode::Delayed;
  int amax_history = 1024;  // window length of delayed scaling (TE's amax_history_len)
  AmaxAlgorithm algorithm = AmaxAlgorithm::Max;
  int margin = 0;           // headroom: the scale is divided by 2^margin

  void validate() const;
};

// fp8_scale_from_amax(amax, fp8_max, margin, previous_scale), the scale rule, is in fp8_scale_rule.h
// (usable in CUDA kernels).

// What a checkpoint keeps of one tensor's scaling.
struct Fp8TensorState {
  float scale = 1.0f;
  std::vector<float> amax_history;  // ring buffer; zeros until filled (amax >= 0, so max is unaffected)
  int64_t next = 0;                 // slot the next amax is written to; the newest is next - 1

  bool operator==(const Fp8TensorState&) const = default;
};

class Fp8TensorScaling {
 public:
  // format is E4M3 or E5M2.
  Fp8TensorScaling(DType format, const Fp8ScalingConfig& config);

  DType format() const { return format_; }
  float fp8_max() const { return fp8_max_; }
  const Fp8ScalingConfig& config() const { return config_; }
  float scale() const { return state_.scale; }
  float scale_inv() const { return 1.0f / state_.scale; }

  // Delayed scaling, after the step that used scale(): records the step's amax (over all its
  // micro-batches) and sets the scale for the next step. Returns the new scale.
  float update(float amax);
  // Current scaling, before quantising: records amax and sets the scale from it alone. Returns the scale.
  float set_current(float amax);
  // The amax the algorithm reads from the window: its max, or the newest entry.
  float window_amax() const;

  const Fp8TensorState& state() const { return state_; }
  // The history length must equal config().amax_history.
  void load_state(const Fp8TensorState& state);

 private:
  void record(float amax);

  DType format_;
  float fp8_max_;
  Fp8ScalingConfig config_;
  Fp8TensorState state_;
};

// The FP8 tensors of a model, by name, in the order they were added. One amax buffer of size() floats
// (downloaded once per step) feeds update() for all of them.
class Fp8ScalingTable {
 public:
  explicit Fp8ScalingTable(const Fp8ScalingConfig& config);

  const Fp8ScalingConfig& config() const { return config_; }
  // Adds a tensor (names must be unique) and returns its index.
  size_t add(std::string name, DType format);
  size_t size() const { return tensors_.size(); }
  Fp8TensorScaling& operator[](size_t i) { return tensors_.at(i); }
  const Fp8TensorScaling& operator[](size_t i) const { return tensors_.at(i); }
  const std::string& name(size_t i) const { return names_.at(i); }
  // Index of a named tensor; throws when there is none.
  size_t index(std::string_view name) const;

  // Delayed scaling: amaxes[i] is tensor i's amax of the step just finished.
  void update(std::span<const float> amaxes);
  std::vector<float> scales() const;

  // A little-endian binary image: magic "GPTFP8S1", version, tensor count, history length, then per
  // tensor its name, format, scale, ring position and history. deserialize() requires the same tensors
  // (names, formats, order) and history length, and names the first difference otherwise.
  std::vector<uint8_t> serialize() const;
  void deserialize(std::span<const uint8_t> bytes);

 private:
  Fp8ScalingConfig config_;
  std::vector<std::string> names_;
  std::vector<Fp8TensorScaling> tensors_;
};

}  // namespace gpt
