// An independent reference for the narrow float formats, written from the format definitions alone and
// sharing no code with precision/float_formats.h: decoding by ldexp from the bit fields, and encoding as a
// nearest-value search over the table of every code's value, with ties to the even code.
#pragma once

#include "precision/float_formats.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace gpt::test {

struct FormatSpec {
  const char* name;
  int exp_bits;
  int man_bits;
  bool has_inf;  // false: E4M3FN, where only S.1111.111 is NaN
  uint32_t canonical_nan;
};

inline uint32_t code_count(const FormatSpec& f) { return 1u << (1 + f.exp_bits + f.man_bits); }
inline uint32_t sign_bit(const FormatSpec& f) { return 1u << (f.exp_bits + f.man_bits); }

inline bool ref_is_nan(const FormatSpec& f, uint32_t code) {
  const uint32_t e = (code >> f.man_bits) & ((1u << f.exp_bits) - 1), m = code & ((1u << f.man_bits) - 1);
  const bool top = e == (1u << f.exp_bits) - 1;
  return f.has_inf ? top && m != 0 : top && m == (1u << f.man_bits) - 1;
}

// The value of a code, from the definition: (-1)^s 2^(e - bias) (1 + m / 2^M), or 2^(1 - bias) m / 2^M
// for e = 0; the top exponent holds inf/NaN (IEEE) or, for E4M3FN, finite values except the NaN code.
inline double ref_decode(const FormatSpec& f, uint32_t code) {
  const int bias = (1 << (f.exp_bits - 1)) - 1;
  const uint32_t e = (code >> f.man_bits) & ((1u << f.exp_bits) - 1), m = code & ((1u << f.man_bits) - 1);
  const double s = (code & sign_bit(f)) ? -1.0 : 1.0;
  if (ref_is_nan(f, code)) return std::numeric_limits<double>::quiet_NaN();
  if (f.has_inf && e == (1u << f.exp_bits) - 1) return s * std::numeric_limits<double>::infinity();
  if (e == 0) return s * std::ldexp(static_cast<double>(m), 1 - bias - f.man_bits);
  return s * std::ldexp(1.0 + std::ldexp(static_cast<double>(m), -f.man_bits), static_cast<int>(e) - bias);
}

// Nearest-value encoder. Positive finite codes 0 .. max_code are increasing in value; one more virtual
// code max_code + 1 stands for max + ulp(max), the value the rounding would reach without the format's
// ceiling: reaching it is an overflow. Ties go to the even code (code & 1 == 0).
class RefEncoder {
 public:
  explicit RefEncoder(const FormatSpec& f) : f_(f) {
    uint32_t c = 0;
    while (!ref_is_nan(f, c) && std::isfinite(ref_decode(f, c))) values_.push_back(ref_decode(f, c++));
    max_code_ = c - 1;
    const double ulp = values_[max_code_] - values_[max_code_ - 1];
    values_.push_back(values_[max_code_] + ulp);
  }

  uint32_t max_code() const { return max_code_; }
  double max_value() const { return values_[max_code_]; }

  uint32_t encode(double x, bool saturate) const {
    if (std::isnan(x)) return f_.canonical_nan;
    const uint32_t sign = std::signbit(x) ? sign_bit(f_) : 0u;
    const double a = std::abs(x);
    uint32_t code;
    if (std::isinf(a) || a >= values_.back()) {
      code = max_code_ + 1;
    } else {
      // values_[lo] <= a < values_[lo + 1]; the midpoint of two neighbours is exact in double.
      const auto it = std::upper_bound(values_.begin(), values_.end(), a);
      const uint32_t lo = static_cast<uint32_t>(it - values_.begin()) - 1;
      const double mid = (values_[lo] + values_[lo + 1]) / 2.0;
      if (a < mid) code = lo;
      else if (a > mid) code = lo + 1;
      else code = (lo & 1u) ? lo + 1 : lo;
    }
    if (code > max_code_) code = saturate ? max_code_ : (f_.has_inf ? max_code_ + 1 : f_.canonical_nan);
    return sign | code;
  }

  // Every positive finite value, ascending (the last entry is the virtual one past max).
  const std::vector<double>& values() const { return values_; }

 private:
  FormatSpec f_;
  std::vector<double> values_;
  uint32_t max_code_ = 0;
};

inline const FormatSpec kBf16Spec{"bf16", 8, 7, true, 0x7FFF};
inline const FormatSpec kF16Spec{"f16", 5, 10, true, 0x7FFF};
inline const FormatSpec kE4m3Spec{"e4m3", 4, 3, false, 0x7F};
inline const FormatSpec kE5m2Spec{"e5m2", 5, 2, true, 0x7F};

}  // namespace gpt::test
