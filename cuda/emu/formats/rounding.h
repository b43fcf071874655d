// Single-rounding arithmetic on narrow formats, as the GPU's add/mul/fma.rn.{f16,bf16} instructions do
// (PTX ISA, "Half Precision Floating-Point Instructions": one rounding to nearest even, subnormals kept).
//
// Math: the operands are exact doubles and so is their product (at most 2 x 11 significant bits). The sum
// s = RN64(p + c) can still be inexact; TwoSum gives its exact error t. Rounding s to odd (moving it one
// ulp toward p + c when t != 0 and s is even) and then to the target's p <= 51 bits gives RN(p + c)
// exactly, because a double rounded to odd never lands on a midpoint of the coarser format unless the
// exact value was on it (Boldo and Melquiond, "Emulation of FMA and correctly rounded sums", 2008).
// Rounding through float instead would double-round fma at ties.
#pragma once

#include "precision/float_formats.h"

#include <cmath>
#include <limits>

namespace gpt::emu::detail {

inline double round_to_odd_sum(double p, double c) {
  const double s = p + c;
  if (!std::isfinite(s)) return s;
  const double pp = s - c;
  const double t = (p - pp) + (c - (s - pp));
  if (t == 0.0 || (f64_bits(s) & 1u) != 0) return s;
  return std::nextafter(s, t > 0 ? std::numeric_limits<double>::infinity()
                                 : -std::numeric_limits<double>::infinity());
}

// a * b + c rounded once to Format (Bf16Format or F16Format), codes in and out.
template <class Format>
typename Format::Storage fma_rn(typename Format::Storage a, typename Format::Storage b,
                                typename Format::Storage c) {
  const double p = static_cast<double>(Format::decode(a)) * static_cast<double>(Format::decode(b));
  return Format::encode(round_to_odd_sum(p, static_cast<double>(Format::decode(c))));
}

template <class Format>
typename Format::Storage add_rn(typename Format::Storage a, typename Format::Storage b) {
  return Format::encode(round_to_odd_sum(Format::decode(a), Format::decode(b)));
}

template <class Format>
typename Format::Storage mul_rn(typename Format::Storage a, typename Format::Storage b) {
  // The product is exact in double; one rounding to the format.
  return Format::encode(static_cast<double>(Format::decode(a)) * static_cast<double>(Format::decode(b)));
}

}  // namespace gpt::emu::detail
