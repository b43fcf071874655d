// Text from files and models, made safe to show on a terminal: a control byte (ESC, NUL, ...) in a sample or
// in a damaged config would otherwise reach the terminal as a command or vanish.
#pragma once

#include <string>
#include <string_view>

namespace gpt {

// Valid UTF-8 and printable ASCII as they are, and newline and tab when keep_newlines; every other byte (C0
// controls, DEL, bytes of malformed UTF-8) and the C1 controls U+0080..U+009F as \xNN per byte.
std::string printable(std::string_view text, bool keep_newlines = true);

}  // namespace gpt
