#include "precision/fp8_scaling.h"

#include "core/error.h"
#include "precision/float_formats.h"

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

namespace gpt {
namespace {

constexpr char kMagic[8] = {'G', 'P', 'T', 'F', 'P', '8', 'S', '1'};
constexpr uint32_t kVersion = 1;
static_assert(std::endian::native == std::endian::little, "the FP8 scaling image is written in host order");

void put(std::vector<uint8_t>& out, const void* p, size_t n) {
  const size_t at = out.size();
  out.resize(at + n);
  if (n > 0) std::memcpy(out.data() + at, p, n);
}
template <class T>
void put(std::vector<uint8_t>& out, T value) {
  put(out, &value, sizeof value);
}

// Reads fields from an image, naming what was cut short.
class Reader {
 public:
  explicit Reader(std::span<const uint8_t> bytes) : bytes_(bytes) {}
  void get(void* p, size_t n, const char* what) {
    GPT_CHECK(pos_ + n <= bytes_.size(), "fp8 scaling state: truncated at byte {} reading {}", pos_, what);
    std::memcpy(p, bytes_.data() + pos_, n);
    pos_ += n;
  }
  template <class T>
  T get(const char* what) {
    T value;
    get(&value, sizeof value, what);
    return value;
  }
  bool done() const { return pos_ == bytes_.size(); }
  size_t pos() const { return pos_; }

 private:
  std::span<const uint8_t> bytes_;
  size_t pos_ = 0;
};

}  // namespace

std::string_view fp8_scaling_mode_name(Fp8ScalingMode mode) { return mode == Fp8ScalingMode::Delayed ? "delayed" : "current"; }

Fp8ScalingMode parse_fp8_scaling_mode(std::string_view name) {
  if (name == "delayed") return Fp8ScalingMode::Delayed;
  if (name == "current") return Fp8ScalingMode::Current;
  GPT_FAIL("unknown fp8 scaling '{}': expected delayed or current", name);
}

std::string_view amax_algorithm_name(AmaxAlgorithm algorithm) { return algorithm == AmaxAlgorithm::Max ? "max" : "most_recent"; }

AmaxAlgorithm parse_amax_algorithm(std::string_view name) {
  if (name == "max") return AmaxAlgorithm::Max;
  if (name == "most_recent") return AmaxAlgorithm::MostRecent;
  GPT_FAIL("unknown amax algorithm '{}': expected max or most_recent", name);
}

void Fp8ScalingConfig::validate() const {
  GPT_CHECK(amax_history >= 1, "precision.fp8.amax_history must be >= 1, got {}", amax_history);
  GPT_CHECK(margin >= 0 && margin <= 64, "precision.fp8.margin must be in [0, 64], got {}", margin);
}

Fp8TensorScaling::Fp8TensorScaling(DType format, const Fp8ScalingConfig& config)
    : format_(format), fp8_max_(float_format_max(format)), config_(config) {
  GPT_CHECK(format == DType::E4M3 || format == DType::E5M2, "fp8 scaling: {} is not an FP8 format (e4m3, e5m2)",
            dtype_name(format));
  config_.validate();
  state_.amax_history.assign(static_cast<size_t>(config_.amax_history), 0.0f);
}

void Fp8TensorScaling::record(float amax) {
  const auto n = static_cast<int64_t>(state_.amax_history.size());
  state_.amax_history[static_cast<size_t>(state_.next)] = amax;
  state_.next = (state_.next + 1) % n;
}

float Fp8TensorScaling::window_amax() const {
  const auto& h = state_.amax_history;
  if (config_.algorithm == AmaxAlgorithm::MostRecent) {
    const auto n = static_cast<int64_t>(h.size());
    return h[static_cast<size_t>((state_.next + n - 1) % n)];
  }
  float m = 0.0f;
  for (float a : h) {
    if (std::isnan(a)) return a;
    m = a > m ? a : m;
  }
  return m;
}

float Fp8TensorScaling::update(float amax) {
  GPT_CHECK(config_.mode == Fp8ScalingMode::Delayed, "fp8 scaling: update() is delayed scaling; this state is configured for {}",
            fp8_scaling_mode_name(config_.mode));
  record(amax);
  state_.scale = fp8_scale_from_amax(window_amax(), fp8_max_, config_.margin, state_.scale);
  return state_.scale;
}

float Fp8TensorScaling::set_current(float amax) {
  GPT_CHECK(config_.mode == Fp8ScalingMode::Current,
            "fp8 scaling: set_current() is current scaling; this state is configured for {}",
            fp8_scaling_mode_name(config_.mode));
  record(amax);
  state_.scale = fp8_scale_from_amax(amax, fp8_max_, config_.margin, state_.scale);
  return state_.scale;
}

void Fp8TensorScaling::load_state(const Fp8TensorState& state) {
  GPT_CHECK(state.amax_history.size() == static_cast<size_t>(config_.amax_history),
            "fp8 scaling state: history of {} amaxes, but fp8.amax_history is {}", state.amax_history.size(),
            config_.amax_history);
  GPT_CHECK(state.next >= 0 && state.next < config_.amax_history, "fp8 scaling state: ring position {} outside [0, {})",
            state.next, config_.amax_history);
  GPT_CHECK(std::isfinite(state.scale) && state.scale > 0.0f, "fp8 scaling state: scale {} must be finite and > 0", state.scale);
  state_ = state;
}

Fp8ScalingTable::Fp8ScalingTable(const Fp8ScalingConfig& config) : config_(config) { config_.validate(); }

size_t Fp8ScalingTable::add(std::string name, DType format) {
  for (const std::string& n : names_) GPT_CHECK(n != name, "fp8 scaling: tensor '{}' added twice", name);
  tensors_.emplace_back(format, config_);
  names_.push_back(std::move(name));
  return tensors_.size() - 1;
}

size_t Fp8ScalingTable::index(std::string_view name) const {
  for (size_t i = 0; i < names_.size(); ++i)
    if (names_[i] == name) return i;
  GPT_FAIL("fp8 scaling: no tensor named '{}'", name);
}

void Fp8ScalingTable::update(std::span<const float> amaxes) {
  GPT_CHECK(amaxes.size() == tensors_.size(), "fp8 scaling: {} amaxes for {} tensors", amaxes.size(), tensors_.size());
  for (size_t i = 0; i < tensors_.size(); ++i) tensors_[i].update(amaxes[i]);
}

std::vector<float> Fp8ScalingTable::scales() const {
  std::vector<float> s;
  s.reserve(tensors_.size());
  for (const auto& t : tensors_) s.push_back(t.scale());
  return s;
}

std::vector<uint8_t> Fp8ScalingTable::serialize() const {
  std::vector<uint8_t> out;
  put(out, kMagic, sizeof kMagic);
  put(out, kVersion);
  put(out, static_cast<uint32_t>(tensors_.size()));
  put(out, static_cast<uint32_t>(config_.amax_history));
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const Fp8TensorState& s = tensors_[i].state();
    put(out, static_cast<uint32_t>(names_[i].size()));
    put(out, names_[i].data(), names_[i].size());
    put(out, static_cast<uint8_t>(tensors_[i].format()));
    put(out, s.scale);
    put(out, s.next);
    put(out, s.amax_history.data(), s.amax_history.size() * sizeof(float));
  }
  return out;
}

void Fp8ScalingTable::deserialize(std::span<const uint8_t> bytes) {
  Reader r(bytes);
  char magic[sizeof kMagic];
  r.get(magic, sizeof magic, "the magic");
  GPT_CHECK(std::memcmp(magic, kMagic, sizeof kMagic) == 0, "fp8 scaling state: bad magic (not a GPTFP8S1 image)");
  const auto version = r.get<uint32_t>("the version");
  GPT_CHECK(version == kVersion, "fp8 scaling state: version {}, this build reads {}", version, kVersion);
  const auto count = r.get<uint32_t>("the tensor count");
  GPT_CHECK(count == tensors_.size(), "fp8 scaling state: {} tensors, the model has {}", count, tensors_.size());
  const auto history = r.get<uint32_t>("the history length");
  GPT_CHECK(history == static_cast<uint32_t>(config_.amax_history),
            "fp8 scaling state: amax history of {}, but fp8.amax_history is {}", history, config_.amax_history);
  std::vector<Fp8TensorState> states(count);
  for (uint32_t i = 0; i < count; ++i) {
    std::string name(r.get<uint32_t>("a name length"), '\0');
    r.get(name.data(), name.size(), "a name");
    GPT_CHECK(name == names_[i], "fp8 scaling state: tensor {} is '{}', the model's is '{}'", i, name, names_[i]);
    const auto format = static_cast<DType>(r.get<uint8_t>("a format"));
    GPT_CHECK(format == tensors_[i].format(), "fp8 scaling state: tensor '{}' is {}, the model's is {}", name,
              dtype_name(format), dtype_name(tensors_[i].format()));
    states[i].scale = r.get<float>("a scale");
    states[i].next = r.get<int64_t>("a ring position");
    states[i].amax_history.resize(history);
    r.get(states[i].amax_history.data(), history * sizeof(float), "an amax history");
  }
  GPT_CHECK(r.done(), "fp8 scaling state: {} trailing bytes", bytes.size() - r.pos());
  // Validate everything before changing anything.
  for (uint32_t i = 0; i < count; ++i) {
    Fp8TensorScaling probe = tensors_[i];
    probe.load_state(states[i]);
  }
  for (uint32_t i = 0; i < count; ++i) tensors_[i].load_state(states[i]);
}

}  // namespace gpt
