#include "io/strict_json.hpp"

#include <unordered_set>
#include <vector>

#include "mixq/error.hpp"

namespace mixq {

nlohmann::json parse_strict_json(std::string_view text, const std::string& where) {
  using nlohmann::json;
  // One key set per open object; arrays get an empty placeholder so that the
  // stack depth is the nesting depth.
  std::vector<std::unordered_set<std::string>> open;
  std::vector<bool> is_object;
  auto callback = [&](int /*depth*/, json::parse_event_t event, json& parsed) -> bool {
    switch (event) {
      case json::parse_event_t::object_start:
      case json::parse_event_t::array_start:
        if (open.size() >= static_cast<size_t>(kMaxJsonDepth))
          fail("{}: JSON nested deeper than {} levels", where, kMaxJsonDepth);
        open.emplace_back();
        is_object.push_back(event == json::parse_event_t::object_start);
        break;
      case json::parse_event_t::object_end:
      case json::parse_event_t::array_end:
        if (!open.empty()) {
          open.pop_back();
          is_object.pop_back();
        }
        break;
      case json::parse_event_t::key:
        if (!open.empty() && is_object.back()) {
          const auto& key = parsed.get_ref<const std::string&>();
          if (!open.back().insert(key).second) fail("{}: duplicate key '{}' in JSON", where, key);
        }
        break;
      case json::parse_event_t::value:
        break;
    }
    return true;
  };
  try {
    return json::parse(text.begin(), text.end(), callback, /*allow_exceptions=*/true,
                       /*ignore_comments=*/false);
  } catch (const json::exception& e) {
    // nlohmann's message carries the byte position ("at line 1, column 17").
    fail("{}: invalid JSON: {}", where, e.what());
  }
}

}  // namespace mixq
