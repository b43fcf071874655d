#include "train/precision_state.h"

#include "core/error.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <charconv>
#include <cstdint>
#include <vector>

namespace gpt {
namespace {

constexpr const char* kScale = "loss_scaler.scale";
constexpr const char* kGoodSteps = "loss_scaler.good_steps";
constexpr const char* kSkippedSteps = "loss_scaler.skipped_steps";
constexpr const char* kConsecutiveSkips = "loss_scaler.consecutive_skips";
constexpr const char* kFp8Blob = "fp8_scaling";

template <class T>
T parse_value(const CheckpointState& state, const char* key, const std::string& dir) {
  const auto it = state.values.find(key);
  GPT_CHECK(it != state.values.end(), "checkpoint '{}': state.yaml has loss-scaler state but no '{}'", dir, key);
  T value{};
  const std::string& text = it->second;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  GPT_CHECK(ec == std::errc() && end == text.data() + text.size(), "checkpoint '{}': '{}' is '{}', not a number", dir,
            key, text);
  return value;
}

}  // namespace

void save_precision_state(CheckpointState& state, const LossScaler* scaler, const Fp8State* fp8) {
  if (scaler) {
    const LossScalerState& s = scaler->state();
    // fmt's shortest representation reads back to the same float.
    state.values[kScale] = fmt::format("{}", s.scale);
    state.values[kGoodSteps] = fmt::format("{}", s.good_steps);
    state.values[kSkippedSteps] = fmt::format("{}", s.skipped_steps);
    state.values[kConsecutiveSkips] = fmt::format("{}", s.consecutive_skips);
  }
  if (fp8) {
    const std::vector<uint8_t> bytes = fp8->table().serialize();
    state.blobs[kFp8Blob] = std::string(bytes.begin(), bytes.end());
  }
}

void restore_precision_state(const CheckpointState& state, const std::string& dir, LossScaler* scaler, Fp8State* fp8) {
  if (scaler) {
    if (state.values.count(kScale) == 0) {
      spdlog::warn("checkpoint '{}' has no loss-scaler state (written under another recipe); the scale starts at {:g}",
                   dir, scaler->scale());
    } else {
      LossScalerState s;
      s.scale = parse_value<float>(state, kScale, dir);
      s.good_steps = parse_value<int64_t>(state, kGoodSteps, dir);
      s.skipped_steps = parse_value<int64_t>(state, kSkippedSteps, dir);
      s.consecutive_skips = parse_value<int64_t>(state, kConsecutiveSkips, dir);
      try {
        scaler->load_state(s);
      } catch (const Error& e) {
        GPT_FAIL("checkpoint '{}': {}", dir, e.what());
      }
    }
  }
  if (fp8) {
    const auto it = state.blobs.find(kFp8Blob);
    if (it == state.blobs.end()) {
      spdlog::warn("checkpoint '{}' has no FP8 scaling state (written under another recipe); every scale starts at 1",
                   dir);
      return;
    }
    const std::string& blob = it->second;
    try {
      fp8->load({reinterpret_cast<const uint8_t*>(blob.data()), blob.size()});
    } catch (const Error& e) {
      GPT_FAIL("checkpoint '{}': blob.{}: {}", dir, kFp8Blob, e.what());
    }
  }
}

}  // namespace gpt
