// ldmatrix and mma.sync.m16n8k16 as warp collectives, after the PTX ISA (9.7.14.5.8 and 9.7.14.5.15).
// With groupID g = lane >> 2 and threadID_in_group t = lane % 4, and register r holding element 2r in its
// low 16 bits and 2r+1 in its high 16 bits:
//   A (16x16, row): a_i at row g + 8 * ((i >> 1) & 1), column 2t + (i & 1) + 8 * (i >= 4)
//   B (16x8, col):  b_i at row 2t + (i & 1) + 8 * (i >= 2), column g
//   C, D (16x8):    c_i at row g + 8 * (i >= 2),          column 2t + (i & 1)
//   ldmatrix: lane l gets row l >> 2, columns 2(l % 4) and 2(l % 4) + 1 of each 8x8 matrix (the C layout);
//   with .trans, rows 2(l % 4) and 2(l % 4) + 1 of column l >> 2.
#include "emu/tensor_core.h"

#include <cstring>

#include "core/error.h"
#include "precision/float_formats.h"

namespace gpt::cuda::emu::detail {
namespace {

uint16_t element(const LaneSlot* row_owner, int col) {
  const unsigned char* row;
  std::memcpy(&row, row_owner->in, sizeof row);
  uint16_t v;
  std::memcpy(&v, row + 2 * col, sizeof v);
  return v;
}

template <bool kTrans>
void combine_ldmatrix(LaneSlot* const* lanes, unsigned, int count) {
  for (int j = 0; j < count; ++j)
    for (int r = 0; r < 8; ++r) {
      const unsigned char* row;
      std::memcpy(&row, lanes[8 * j + r]->in, sizeof row);
      GPT_CHECK(reinterpret_cast<uintptr_t>(row) % 16 == 0,
                "ldmatrix: the row address {} of lane {} is not 16-byte aligned", static_cast<const void*>(row),
                8 * j + r);
    }
  for (int lane = 0; lane < kWarpSize; ++lane) {
    const int g = lane >> 2, t = lane % 4;
    for (int j = 0; j < count; ++j) {
      uint16_t lo, hi;
      if (kTrans) {
        lo = element(lanes[8 * j + 2 * t], g);
        hi = element(lanes[8 * j + 2 * t + 1], g);
      } else {
        lo = element(lanes[8 * j + g], 2 * t);
        hi = element(lanes[8 * j + g], 2 * t + 1);
      }
      const uint32_t reg = lo | (uint32_t{hi} << 16);
      std::memcpy(lanes[lane]->out + 4 * j, &reg, 4);
    }
  }
}

struct MmaFragments {
  uint32_t a[4], b[2];
  float c[4];
};

float decode(MmaInput input, uint32_t reg, int half) {
  const auto bits = static_cast<uint16_t>(half == 0 ? reg & 0xFFFF : reg >> 16);
  return input == MmaInput::kBf16 ? bf16_to_f32(bits) : f16_to_f32(bits);
}

template <MmaInput kInput>
void combine_mma(LaneSlot* const* lanes, unsigned, int) {
  float A[16][16], B[16][8], C[16][8];
  for (int lane = 0; lane < kWarpSize; ++lane) {
    MmaFragments f;
    std::memcpy(&f, lanes[lane]->in, sizeof f);
    const int g = lane >> 2, t = lane % 4;
    for (int i = 0; i < 8; ++i)
      A[g + 8 * ((i >> 1) & 1)][2 * t + (i & 1) + 8 * (i >= 4)] = decode(kInput, f.a[i / 2], i % 2);
    for (int i = 0; i < 4; ++i) B[2 * t + (i & 1) + 8 * (i >= 2)][g] = decode(kInput, f.b[i / 2], i % 2);
    for (int i = 0; i < 4; ++i) C[g + 8 * (i >= 2)][2 * t + (i & 1)] = f.c[i];
  }
  for (int lane = 0; lane < kWarpSize; ++lane) {
    const int g = lane >> 2, t = lane % 4;
    float d[4];
    for (int i = 0; i < 4; ++i) {
      const int row = g + 8 * (i >= 2), col = 2 * t + (i & 1);
      double acc = C[row][col];
      for (int k = 0; k < 16; ++k) acc += static_cast<double>(A[row][k]) * B[k][col];
      d[i] = static_cast<float>(acc);
    }
    std::memcpy(lanes[lane]->out, d, sizeof d);
  }
}

}  // namespace

void ldmatrix(int count, bool trans, const void* row_address, uint32_t* regs) {
  require_compute_capability(75, "ldmatrix");
  GPT_CHECK(count == 1 || count == 2 || count == 4, "ldmatrix: .x{} does not exist (x1, x2, x4)", count);
  LaneSlot& slot = lane_slot();
  std::memcpy(slot.in, &row_address, sizeof row_address);
  // .sync.aligned: the whole warp executes it, even the lanes whose addresses a smaller count ignores.
  warp_collective(0xFFFFFFFFu, {trans ? "ldmatrix.trans" : "ldmatrix",
                                trans ? &combine_ldmatrix<true> : &combine_ldmatrix<false>, count});
  std::memcpy(regs, slot.out, 4 * static_cast<size_t>(count));
}

void mma_m16n8k16(MmaInput input, const uint32_t* a, const uint32_t* b, const float* c, float* d) {
  require_compute_capability(80, input == MmaInput::kBf16 ? "mma.sync.m16n8k16 with BF16 inputs" : "mma.sync.m16n8k16");
  MmaFragments f;
  std::memcpy(f.a, a, sizeof f.a);
  std::memcpy(f.b, b, sizeof f.b);
  std::memcpy(f.c, c, sizeof f.c);
  LaneSlot& slot = lane_slot();
  static_assert(sizeof(MmaFragments) <= sizeof(slot.in));
  std::memcpy(slot.in, &f, sizeof f);
  warp_collective(0xFFFFFFFFu, {input == MmaInput::kBf16 ? "mma.m16n8k16.bf16" : "mma.m16n8k16.f16",
                                input == MmaInput::kBf16 ? &combine_mma<MmaInput::kBf16> : &combine_mma<MmaInput::kF16>,
                                0});
  std::memcpy(d, slot.out, 4 * sizeof(float));
}

}  // namespace gpt::cuda::emu::detail
