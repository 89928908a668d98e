// Writing markers, the inverse of collecting them (marker.cpp): the bytes of
// a `<prefix>.comfy_quant` tensor and the header's `_quantization_metadata`
// value, both as ComfyUI writes them (docs/DISPATCH.md §1.1, §1.2).
#include <string>

#include "mixq/marker.hpp"

namespace mixq {

namespace {

// Python's json.dumps(obj) with default separators; non-ASCII escaped like
// ensure_ascii=True is not needed for marker keys, so strings use nlohmann's
// escaping (identical for ASCII).
void dump_python(const nlohmann::json& value, std::string& out) {
  if (value.is_object()) {
    out += '{';
    bool first = true;
    auto emit = [&](const std::string& key, const nlohmann::json& v) {
      if (!first) out += ", ";
      first = false;
      out += nlohmann::json(key).dump();
      out += ": ";
      dump_python(v, out);
    };
    if (auto it = value.find("format"); it != value.end()) emit("format", *it);
    for (const auto& [key, v] : value.items())
      if (key != "format") emit(key, v);
    out += '}';
  } else if (value.is_array()) {
    out += '[';
    for (size_t i = 0; i < value.size(); ++i) {
      if (i) out += ", ";
      dump_python(value[i], out);
    }
    out += ']';
  } else {
    out += value.dump();
  }
}

}  // namespace

std::string marker_json(const nlohmann::json& marker) {
  std::string out;
  dump_python(marker, out);
  return out;
}

std::string header_markers_json(const nlohmann::json& layers) {
  const nlohmann::json doc = {{"format_version", "1.0"}, {std::string(kHeaderLayersKey), layers}};
  return doc.dump();
}

}  // namespace mixq
