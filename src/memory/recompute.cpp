#include "memory/recompute.h"

#include "core/error.h"

#include <cctype>
#include <cmath>
#include <cstdlib>

namespace gpt {

int auto_recompute_every(int n_layer) { return std::max(1, static_cast<int>(std::lround(std::sqrt(n_layer)))); }

namespace {

std::optional<int> parse_int(const std::string& s) {
  if (s.empty() || s.size() > 9) return std::nullopt;
  for (char c : s)
    if (!std::isdigit(static_cast<unsigned char>(c))) return std::nullopt;
  return std::stoi(s);
}

}  // namespace

RecomputePolicy resolve_recompute(const RecomputeConfig& c, int n_layer) {
  RecomputePolicy p;
  p.mode = c.mode == "selective" ? RecomputeMode::Selective : c.mode == "full" ? RecomputeMode::Full : RecomputeMode::None;
  for (const std::string& op : c.ops) {
    p.attention |= op == "attention";
    p.gelu |= op == "gelu";
    p.layernorm |= op == "layernorm";
  }
  if (c.every == "auto") {
    p.every = auto_recompute_every(n_layer);
  } else {
    auto k = parse_int(c.every);
    GPT_CHECK(k && *k >= 1 && *k <= n_layer, "recompute.every: '{}' is not valid; use auto or a number from 1 to n_layer = {}",
              c.every, n_layer);
    p.every = *k;
  }
  if (c.layers == "all") {
    p.layers = n_layer;
  } else {
    auto n = parse_int(c.layers);
    GPT_CHECK(n && *n <= n_layer, "recompute.layers: '{}' is not valid; use all or a number from 0 to n_layer = {}",
              c.layers, n_layer);
    p.layers = *n;
  }
  GPT_CHECK(p.mode != RecomputeMode::Selective || !c.ops.empty(),
            "recompute.ops: is empty with mode selective; list at least one of attention, gelu, layernorm");
  return p;
}

RecomputeConfig recompute_config(const RecomputePolicy& p, int n_layer) {
  RecomputeConfig c;
  c.mode = p.mode == RecomputeMode::Selective ? "selective" : p.mode == RecomputeMode::Full ? "full" : "none";
  if (p.mode == RecomputeMode::Selective) {
    c.ops.clear();
    if (p.attention) c.ops.push_back("attention");
    if (p.gelu) c.ops.push_back("gelu");
    if (p.layernorm) c.ops.push_back("layernorm");
  }
  c.every = std::to_string(p.every);
  c.layers = p.layers == n_layer ? "all" : std::to_string(p.layers);
  return c;
}

std::string RecomputePolicy::describe() const {
  std::string s;
  switch (mode) {
    case RecomputeMode::None: return "none";
    case RecomputeMode::Selective:
      s = "selective [";
      for (auto [on, name] : {std::pair{attention, "attention"}, std::pair{gelu, "gelu"}, std::pair{layernorm, "layernorm"}})
        if (on) s += (s.back() == '[' ? "" : ",") + std::string(name);
      s += "]";
      break;
    case RecomputeMode::Full: s = "full every " + std::to_string(every); break;
  }
  return s + " (" + std::to_string(layers) + " blocks)";
}

std::optional<uint64_t> parse_byte_size(std::string_view text) {
  std::string s(text);
  size_t pos = 0;
  double value = 0.0;
  try {
    value = std::stod(s, &pos);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  while (pos < s.size() && s[pos] == ' ') ++pos;
  const std::string unit = s.substr(pos);
  double scale = 0.0;
  if (unit.empty() || unit == "B") scale = 1.0;
  else if (unit == "KiB") scale = 1024.0;
  else if (unit == "MiB") scale = 1024.0 * 1024;
  else if (unit == "GiB") scale = 1024.0 * 1024 * 1024;
  else if (unit == "TiB") scale = 1024.0 * 1024 * 1024 * 1024;
  else if (unit == "KB") scale = 1e3;
  else if (unit == "MB") scale = 1e6;
  else if (unit == "GB") scale = 1e9;
  else if (unit == "TB") scale = 1e12;
  if (scale == 0.0 || !(value > 0.0) || !std::isfinite(value)) return std::nullopt;
  return static_cast<uint64_t>(value * scale);
}

std::string format_bytes(uint64_t bytes) {
  const double b = static_cast<double>(bytes);
  if (b >= 1024.0 * 1024 * 1024) return fmt::format("{:.2f} GiB", b / (1024.0 * 1024 * 1024));
  if (b >= 1024.0 * 1024) return fmt::format("{:.1f} MiB", b / (1024.0 * 1024));
  if (b >= 1024.0) return fmt::format("{:.1f} KiB", b / 1024.0);
  return fmt::format("{} B", bytes);
}

}  // namespace gpt
