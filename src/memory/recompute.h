// Activation recomputation policy, resolved from the `recompute:` config section for a model depth.
#pragma once

#include "config/config.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace gpt {

enum class RecomputeMode { None, Selective, Full };

struct RecomputePolicy {
  RecomputeMode mode = RecomputeMode::None;
  // mode Selective: which activations are recomputed in backward instead of stored.
  bool attention = false, gelu = false, layernorm = false;
  // mode Full: segment length k; the input of blocks 0, k, 2k, ... is kept.
  int every = 1;
  // Blocks [0, layers) follow the mode; the rest keep everything.
  int layers = 0;

  bool recomputes(int block) const { return mode != RecomputeMode::None && block < layers; }
  bool full(int block) const { return mode == RecomputeMode::Full && block < layers; }
  bool selective(int block) const { return mode == RecomputeMode::Selective && block < layers; }
  // First block of the full-recompute segment holding `block`, and one past its last.
  int segment_start(int block) const { return block / every * every; }
  int segment_end(int block) const { return std::min(segment_start(block) + every, layers); }
  std::string describe() const;
};

// Throws gpt::Error naming the key for a value that does not resolve (every: 0, layers: 99, ...).
RecomputePolicy resolve_recompute(const RecomputeConfig& config, int n_layer);

// The config section that resolves to this policy (for the resolved config a planner chose).
RecomputeConfig recompute_config(const RecomputePolicy& policy, int n_layer);

// k = round(sqrt(L)), which minimises k + L/k block-sized buffers.
int auto_recompute_every(int n_layer);

// "8GiB", "512MiB", "1.5GB", "1000000" (bytes); nullopt when not a size.
std::optional<uint64_t> parse_byte_size(std::string_view text);
std::string format_bytes(uint64_t bytes);

}  // namespace gpt
