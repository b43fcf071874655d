#include "core/printable.h"

#include <gtest/gtest.h>

namespace gpt {
namespace {

TEST(Printable, ControlBytesAreEscapedAndUtf8IsKept) {
  EXPECT_EQ(printable("plain text\n\tindented"), "plain text\n\tindented");
  EXPECT_EQ(printable(std::string("a\0b", 3)), "a\\x00b");
  EXPECT_EQ(printable("\x1b[31mred\x7f"), "\\x1b[31mred\\x7f");
  EXPECT_EQ(printable("line\nnext", /*keep_newlines=*/false), "line\\x0anext");
  EXPECT_EQ(printable("caf\xc3\xa9 \xe2\x80\x94 \xf0\x9f\x98\x80"), "caf\xc3\xa9 \xe2\x80\x94 \xf0\x9f\x98\x80");
  // Malformed UTF-8 (a lone continuation byte, a cut sequence, an overlong form, a surrogate) and the C1
  // controls, which terminals act on, byte by byte.
  EXPECT_EQ(printable("\x80"), "\\x80");
  EXPECT_EQ(printable("\xe2\x80"), "\\xe2\\x80");
  EXPECT_EQ(printable("\xc0\xaf"), "\\xc0\\xaf");
  EXPECT_EQ(printable("\xed\xa0\x80"), "\\xed\\xa0\\x80");
  EXPECT_EQ(printable("\xc2\x9b"), "\\xc2\\x9b");
}

}  // namespace
}  // namespace gpt
