#pragma once
// Text from files (tensor names, marker strings, paths) is hostile: it may hold
// control characters that move a terminal's cursor, recolour or clear it, or
// bytes that are not UTF-8. Everything mixq prints for people goes through
// escape_text; everything it prints as JSON through make_json_utf8.
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

namespace mixq {

// One printable line: C0 controls, DEL and bytes that are not part of valid
// UTF-8 become `\xNN` (`\x1b`, `\x0a`, `\xff`); C1 controls (U+0080..U+009F)
// and the invisible direction/line controls a reader could be fooled by
// (U+2028, U+2029, U+202A..U+202E, U+2066..U+2069) become `\uNNNN`. Other
// characters, the backslash included, are unchanged, so escaping twice gives
// the same text as escaping once.
std::string escape_text(std::string_view text);

// `text` with every byte that is not part of valid UTF-8 written as `\xNN`
// (nothing else changes): what a JSON string may hold.
std::string valid_utf8(std::string_view text);

// valid_utf8 applied to every string and object key inside `value`, so that
// dump() cannot throw (nlohmann rejects invalid UTF-8, e.g. in a path taken
// from the command line).
void make_json_utf8(nlohmann::json& value);

}  // namespace mixq
