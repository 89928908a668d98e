// Collects Comfy quantization markers from both dialects and normalises the
// legacy "scaled fp8" convention (docs/DISPATCH.md §1.1, §1.2, §1.6).
#include "mixq/marker.hpp"

#include <cstring>
#include <set>
#include <string_view>

#include "io/strict_json.hpp"
#include "mixq/error.hpp"
#include "mixq/numeric.hpp"

namespace mixq {
namespace {

using nlohmann::json;

constexpr std::string_view kSentinel = "scaled_fp8";

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// Strict UTF-8 (no overlongs, no surrogates, at most U+10FFFF). Returns the
// offset of the first bad byte, or npos.
size_t first_invalid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (len == 0 || i + len > s.size()) return i;
    uint32_t cp = len == 1 ? c : len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
    for (size_t j = 1; j < len; ++j) {
      const auto cc = static_cast<unsigned char>(s[i + j]);
      if ((cc >> 6) != 0x2) return i;
      cp = (cp << 6) | (cc & 0x3F);
    }
    const uint32_t min_cp[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_cp[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return i;
    i += len;
  }
  return std::string_view::npos;
}

// Turns one marker object into a Marker: "format" required, a nested
// "params" object flattened with top-level keys winning.
Marker normalise(const std::string& prefix, const json& object, const std::string& source,
                 std::vector<std::string>& warnings) {
  if (prefix.find('\0') != std::string::npos)
    fail("layer '{}': marker from {}: the layer name holds a NUL byte", prefix, source);
  if (!object.is_object())
    fail("layer '{}': marker from {} must contain a JSON object, found {}", prefix, source,
         object.type_name());
  auto format = object.find("format");
  if (format == object.end())
    fail("layer '{}': marker from {} has no \"format\" (unknown quantization format)", prefix, source);
  if (!format->is_string())
    fail("layer '{}': marker from {}: \"format\" must be a string, found {}", prefix, source,
         format->type_name());
  Marker marker{prefix, format->get<std::string>(), json::object(), source};
  for (const auto& [key, value] : object.items())
    if (key != "format" && key != "params") marker.params[key] = value;
  if (auto nested = object.find("params"); nested != object.end()) {
    if (!nested->is_object())
      fail("layer '{}': marker from {}: \"params\" must be an object, found {}", prefix, source,
           nested->type_name());
    for (const auto& [key, value] : nested->items())
      if (!marker.params.contains(key)) marker.params[key] = value;
  }
  if (marker.params.erase(std::string(kScaleLayoutKey)))
    warnings.push_back(fmt::format("layer '{}': marker from {} sets \"{}\", which only mixq itself sets (for "
                                   "SGLang's global MXFP8 rule); ignored",
                                   prefix, source, kScaleLayoutKey));
  return marker;
}

// Keys of `object`'s nested "params" that are not also given at top level.
std::set<std::string> nested_only_keys(const json& object) {
  std::set<std::string> keys;
  auto nested = object.find("params");
  if (nested == object.end() || !nested->is_object()) return keys;
  for (const auto& [key, value] : nested->items())
    if (!object.contains(key)) keys.insert(key);
  return keys;
}

// Adds a marker; the same prefix declared twice must be identical.
void add_marker(MarkerSet& set, Marker marker, std::set<std::string> nested = {}) {
  auto [it, inserted] = set.markers.try_emplace(marker.prefix, marker);
  if (inserted) {
    if (!nested.empty()) set.nested_keys[marker.prefix] = std::move(nested);
    return;
  }
  const Marker& old = it->second;
  if (old.format == marker.format && old.params == marker.params) return;
  bool key_conflict = old.format != marker.format;
  for (const auto& [key, value] : marker.params.items())
    if (auto other = old.params.find(key); other != old.params.end() && *other != value) key_conflict = true;
  throw MarkerConflict(
      fmt::format("Conflicting Comfy quantization markers for '{}': {} declares {} but {} declares {}",
                  marker.prefix, old.source, json{{"format", old.format}, {"params", old.params}}.dump(),
                  marker.source, json{{"format", marker.format}, {"params", marker.params}}.dump()),
      key_conflict);
}

std::string file_name(const Checkpoint& checkpoint, const TensorView& tensor) {
  return checkpoint.files().at(static_cast<size_t>(tensor.file)).path;
}

void collect_tensor_markers(const Checkpoint& checkpoint, MarkerSet& set) {
  for (const TensorView& tensor : checkpoint.tensors()) {
    if (!ends_with(tensor.name, kMarkerSuffix)) continue;
    const std::string prefix = tensor.name.substr(0, tensor.name.size() - kMarkerSuffix.size());
    const std::string source =
        fmt::format("tensor '{}' in {}", tensor.name, file_name(checkpoint, tensor));
    if ((tensor.dtype != DType::U8 && tensor.dtype != DType::I8) || tensor.rank() != 1)
      fail("layer '{}': Invalid Comfy quantization marker {}: expected a 1-D U8 tensor, found {} {}",
           prefix, source, dtype_name(tensor.dtype), shape_str(tensor.shape));
    if (tensor.data.size() > kMaxMarkerBytes)
      fail("layer '{}': Invalid Comfy quantization marker {}: {} bytes, more than the {} KiB a marker may hold",
           prefix, source, tensor.data.size(), kMaxMarkerBytes / 1024);
    std::string text(tensor.data.size(), '\0');
    if (!text.empty()) checkpoint.read(tensor, text.data());
    if (size_t bad = first_invalid_utf8(text); bad != std::string_view::npos)
      fail("layer '{}': Invalid Comfy quantization marker {}: not UTF-8 (byte {})", prefix, source, bad);
    const json object =
        parse_strict_json(text, fmt::format("layer '{}': Invalid Comfy quantization marker {}", prefix, source));
    add_marker(set, normalise(prefix, object, source, set.warnings), nested_only_keys(object));
    set.consumed.insert(tensor.name);
  }
}

void collect_header_markers(const Checkpoint& checkpoint, MarkerSet& set) {
  for (const FileInfo& file : checkpoint.files()) {
    auto entry = file.metadata.find(std::string(kHeaderMarkersKey));
    if (entry == file.metadata.end()) continue;
    if (entry->second.size() > kMaxQuantizationMetadataBytes)
      fail("Invalid _quantization_metadata in {}: {} bytes, more than the {} MiB limit", file.path,
           entry->second.size(), kMaxQuantizationMetadataBytes >> 20);
    const json root = parse_strict_json(entry->second, fmt::format("Invalid _quantization_metadata in {}", file.path));
    if (!root.is_object())
      fail("Invalid _quantization_metadata in {}: must contain an object, found {}", file.path,
           root.type_name());
    auto layers = root.find(std::string(kHeaderLayersKey));
    if (layers == root.end() || !layers->is_object())
      fail("Invalid _quantization_metadata in {}: must contain a layers object", file.path);
    const std::string source = fmt::format("header of {}", file.path);
    for (const auto& [prefix, marker] : layers->items())
      add_marker(set, normalise(prefix, marker, source, set.warnings), nested_only_keys(marker));
  }
}

bool has_header_markers(const Checkpoint& checkpoint) {
  for (const FileInfo& file : checkpoint.files())
    if (file.metadata.count(std::string(kHeaderMarkersKey))) return true;
  return false;
}

bool all_ones(const TensorView& tensor) {
  for (float v : to_f32(tensor))
    if (v != 1.0f) return false;
  return true;
}

// Legacy ComfyUI "scaled fp8" files (convert_old_quants): a sentinel tensor
// `<model_prefix>scaled_fp8`, per-layer `.scale_weight` / `.scale_input`.
void normalise_scaled_fp8(const Checkpoint& checkpoint, MarkerSet& set) {
  if (has_header_markers(checkpoint)) return;
  for (const TensorView& sentinel : checkpoint.tensors()) {
    const std::string_view name = sentinel.name;
    if (!(name == kSentinel || ends_with(name, std::string(".") + std::string(kSentinel)))) continue;
    const std::string model_prefix(name.substr(0, name.size() - kSentinel.size()));
    const bool full_precision = sentinel.numel() == 2;
    const std::string source = fmt::format("legacy scaled_fp8 in {}", file_name(checkpoint, sentinel));
    set.consumed.insert(sentinel.name);
    for (const TensorView& tensor : checkpoint.tensors()) {
      const std::string_view t = tensor.name;
      if (t.substr(0, model_prefix.size()) != model_prefix) continue;
      if (ends_with(t, ".scale_weight")) {
        const std::string layer(t.substr(0, t.size() - std::strlen(".scale_weight")));
        set.renamed[layer + ".weight_scale"] = tensor.name;
        Marker marker{layer, "float8_e4m3fn", json::object(), source};
        if (full_precision) marker.params["full_precision_matrix_mult"] = true;
        add_marker(set, std::move(marker));
      } else if (ends_with(t, ".scale_input")) {
        const std::string layer(t.substr(0, t.size() - std::strlen(".scale_input")));
        if (all_ones(tensor))
          set.consumed.insert(tensor.name);
        else
          set.renamed[layer + ".input_scale"] = tensor.name;
      }
    }
    set.warnings.push_back(fmt::format(
        "{}: legacy scaled_fp8 checkpoint normalised (scale_weight -> weight_scale)", sentinel.name));
  }
}

std::string lower(std::string text) {
  for (char& c : text)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return text;
}

// SGLang's global MXFP8 rule (inspect_comfy_quant_markers): when the set of
// `quant_format` values over all files is exactly {"mxfp8"}, every unmarked
// weight stored as F8_E4M3 [N, K] (K % 32 == 0) with a U8 weight_scale of
// exactly [N, K/32] is an mxfp8 layer, its block exponents row-major (SRT's
// MXFP8 convention; nothing in such a file is swizzled). Weights that do not
// fit stay unmarked: the accounting then rejects them (SGLang raises
// "MXFP8 layer ... has incompatible weight/scale metadata").
void imply_global_mxfp8(const Checkpoint& checkpoint, MarkerSet& set) {
  for (const FileInfo& file : checkpoint.files())
    if (auto it = file.metadata.find("quant_format"); it != file.metadata.end() && !it->second.empty())
      set.global_quant_formats.insert(lower(it->second));
  if (!global_mxfp8(set)) return;
  size_t implied = 0;
  for (const TensorView& weight : checkpoint.tensors()) {
    if (!ends_with(weight.name, ".weight") || weight.dtype != DType::F8_E4M3 || weight.rank() != 2) continue;
    const std::string prefix = weight.name.substr(0, weight.name.size() - std::strlen(".weight"));
    if (set.markers.count(prefix) || weight.shape[1] % 32 != 0) continue;
    const TensorView* scale = checkpoint.find(prefix + ".weight_scale");
    if (!scale || scale->dtype != DType::U8 || scale->shape != Shape{weight.shape[0], weight.shape[1] / 32})
      continue;
    Marker marker{prefix, "mxfp8", json::object(),
                  fmt::format("the header's quant_format \"mxfp8\" in {}", file_name(checkpoint, weight))};
    marker.params[std::string(kScaleLayoutKey)] = "linear";
    set.markers.emplace(prefix, std::move(marker));
    set.implied.insert(prefix);
    ++implied;
  }
  if (implied > 0)
    set.warnings.push_back(fmt::format(
        "header quant_format \"mxfp8\": {} unmarked F8_E4M3 weight(s) with U8 [N, K/32] weight_scale read as mxfp8 "
        "with row-major block exponents (SGLang's global MXFP8 rule; ComfyUI ignores quant_format)",
        implied));
}

}  // namespace

bool global_mxfp8(const MarkerSet& markers) {
  return markers.global_quant_formats == std::set<std::string>{"mxfp8"};
}

MarkerSet collect_markers(const Checkpoint& checkpoint) {
  MarkerSet set;
  collect_tensor_markers(checkpoint, set);
  collect_header_markers(checkpoint, set);
  imply_global_mxfp8(checkpoint, set);
  normalise_scaled_fp8(checkpoint, set);
  return set;
}

}  // namespace mixq
