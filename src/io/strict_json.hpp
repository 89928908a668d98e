#pragma once
// JSON parsing for hostile input: nlohmann's parser silently keeps the last of
// duplicate keys, so this one rejects duplicates at every level, and it caps
// nesting depth (nlohmann's DOM functions recurse: a million '[' overflow the
// stack). Every JSON text mixq reads goes through here: headers, markers,
// _quantization_metadata, index files, recipes. Errors are mixq::Error naming
// `where` (file, tensor, ...).
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace mixq {

// Nesting deeper than this is rejected (safetensors headers need 3 levels).
inline constexpr int kMaxJsonDepth = 64;

nlohmann::json parse_strict_json(std::string_view text, const std::string& where);

// The same checks, but nullopt instead of an Error (for values that may be
// JSON or plain text, e.g. `key=value` on a command line).
std::optional<nlohmann::json> try_parse_strict_json(std::string_view text);

// Streams the members of a top-level JSON object: `member(key, value)` is
// called for each in file order, and only the member being read is held as a
// DOM, so memory follows the largest member, not the document (a safetensors
// header lists millions of tensors). Duplicate keys are rejected below the
// top level; at the top level the caller checks them (it keeps the keys
// anyway). A document that is not an object is an Error ("must be a JSON
// object, found array").
void parse_strict_json_members(std::string_view text, const std::string& where,
                               const std::function<void(std::string&& key, nlohmann::json&& value)>& member);

}  // namespace mixq
