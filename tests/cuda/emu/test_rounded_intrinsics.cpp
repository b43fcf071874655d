// The emulated round-to-nearest intrinsics (emu/formats/rounded_intrinsics.h) round after every operation
// even where this file's compiler would contract the same expression into an FMA: g++ -O3 -march=native
// fuses x * y + z written in one function, and inlining puts __fadd_rn(__fmul_rn(x, y), z) there too.
// The operands come from memory at run time, so no constant folding decides the result instead.
#include "common/cuda_api.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace {

// x * y = 1 + 2^-11 + 2^-24 exactly, a tie between two floats that rounds to 1 + 2^-11; with
// z = -(1 + 2^-11) the separately rounded sum is 0 and the fused one 2^-24.
const std::vector<float> kOperands = {1.0f + 0x1p-12f, 1.0f + 0x1p-12f, -(1.0f + 0x1p-11f)};

TEST(EmuRoundedIntrinsics, AProductAndASumRoundSeparately) {
  const std::vector<float>& o = kOperands;
  EXPECT_EQ(__fadd_rn(__fmul_rn(o[0], o[1]), o[2]), 0.0f);
  EXPECT_EQ(__fadd_rn(o[2], __fmul_rn(o[0], o[1])), 0.0f);
  EXPECT_EQ(__fsub_rn(__fmul_rn(o[0], o[1]), -o[2]), 0.0f);
  EXPECT_EQ(__fmul_rn(o[0], o[1]) + o[2], 0.0f) << "a plain sum of __fmul_rn's result";
  EXPECT_EQ(__fadd_rn(o[0] * o[1], o[2]), 0.0f) << "__fadd_rn of a plain product";
}

TEST(EmuRoundedIntrinsics, FmafRoundsOnce) {
  const std::vector<float>& o = kOperands;
  EXPECT_EQ(__fmaf_rn(o[0], o[1], o[2]), 0x1p-24f);
}

TEST(EmuRoundedIntrinsics, DivisionAndSquareRootAreCorrectlyRounded) {
  const std::vector<float> x = {1.0f, 3.0f, 2.0f};
  EXPECT_EQ(__fdiv_rn(x[0], x[1]), static_cast<float>(1.0 / 3.0));
  EXPECT_EQ(__fsqrt_rn(x[2]), static_cast<float>(std::sqrt(2.0)));
}

}  // namespace
