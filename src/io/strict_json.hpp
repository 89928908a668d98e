#pragma once
// JSON parsing for hostile input: nlohmann's parser silently keeps the last of
// duplicate keys, so this one rejects duplicates at every level, and it caps
// nesting depth. Errors are mixq::Error naming `where` (file, tensor, ...).
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace mixq {

// Nesting deeper than this is rejected (safetensors headers need 3 levels).
inline constexpr int kMaxJsonDepth = 64;

nlohmann::json parse_strict_json(std::string_view text, const std::string& where);

}  // namespace mixq
