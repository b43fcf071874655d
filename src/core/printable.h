// Text from files and models, made safe to show on a terminal: a control byte (ESC, NUL, ...) in a sample or
// in a damaged config would otherwise reach the terminal as a command or vanish.
#pragma once

#include <string>
#include <string_view>

namespace gpt {

// Valid UTF-8 and printable ASCII as they are, and newline and tab when keep_newlines; every other byte (C0
// controls, DEL, bytes of malformed UTF-8) and the C1 controls U+0080..U+009F as \xNN per byte.
std::string printable(std::string_view text, bool keep_newlines = true);

// The message without the " (src/.../file.cpp:123)" locations gpt::Error appends: users need what went wrong
// and what to do; the source location is for log.level: debug and bug reports.
std::string without_source_locations(std::string_view message);

// An error message as the log shows it: escaped, and without source locations unless the log level is debug.
std::string message_for_log(std::string_view message);

}  // namespace gpt
