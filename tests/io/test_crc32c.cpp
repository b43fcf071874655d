#include "io/crc32c.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace gpt::test {
namespace {

// Known answers: the CRC catalogue's check value, and the iSCSI vectors of RFC 3720 B.4.
TEST(Crc32c, KnownAnswers) {
  const std::string check = "123456789";
  EXPECT_EQ(crc32c(check.data(), check.size()), 0xE3069283u);
  EXPECT_EQ(crc32c_portable(check.data(), check.size()), 0xE3069283u);
  std::vector<uint8_t> zeros(32, 0x00), ones(32, 0xFF), up(32), down(32);
  for (int i = 0; i < 32; ++i) up[i] = static_cast<uint8_t>(i), down[i] = static_cast<uint8_t>(31 - i);
  for (auto f : {&crc32c, &crc32c_portable}) {
    EXPECT_EQ(f(zeros.data(), 32, 0), 0x8A9136AAu);
    EXPECT_EQ(f(ones.data(), 32, 0), 0x62A8AB43u);
    EXPECT_EQ(f(up.data(), 32, 0), 0x46DD794Eu);
    EXPECT_EQ(f(down.data(), 32, 0), 0x113FDB5Cu);
    EXPECT_EQ(f(nullptr, 0, 0), 0u);
  }
}

// The hardware and table paths agree on every length and alignment, and a CRC extends piece by piece.
TEST(Crc32c, PathsAgreeAndExtend) {
  std::vector<uint8_t> data(1000);
  uint32_t x = 12345;
  for (auto& b : data) b = static_cast<uint8_t>((x = x * 1103515245u + 12345u) >> 24);
  for (size_t offset : {0, 1, 3, 7}) {
    for (size_t n : {0, 1, 7, 8, 9, 63, 64, 65, 500, 993}) {
      const uint32_t whole = crc32c(data.data() + offset, n);
      EXPECT_EQ(whole, crc32c_portable(data.data() + offset, n)) << offset << " " << n;
      for (size_t cut : {size_t{0}, n / 3, n}) {
        const uint32_t first = crc32c(data.data() + offset, cut);
        EXPECT_EQ(crc32c(data.data() + offset + cut, n - cut, first), whole);
      }
    }
  }
}

}  // namespace
}  // namespace gpt::test
