#pragma once
// Per-layer quantization declarations ("Comfy markers") collected from both
// dialects: `<prefix>.comfy_quant` U8 tensors holding a UTF-8 JSON object, and
// the safetensors header's `_quantization_metadata` {"layers": {prefix: marker}}.
// Legacy "scaled fp8" files are normalised here (docs/DISPATCH.md §1.6).
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "mixq/checkpoint.hpp"
#include "mixq/error.hpp"

namespace mixq {

// The key names of the Comfy convention, defined once for reading and writing.
inline constexpr std::string_view kMarkerSuffix = ".comfy_quant";         // <prefix>.comfy_quant
inline constexpr std::string_view kHeaderMarkersKey = "_quantization_metadata";  // in __metadata__
inline constexpr std::string_view kHeaderLayersKey = "layers";             // {prefix: marker}

struct Marker {
  std::string prefix;
  std::string format;
  // Every key of the marker except "format", with a nested "params" object
  // flattened into the top level (top-level keys win). Defaults not applied.
  nlohmann::json params = nlohmann::json::object();
  // Where it was declared, for messages: "tensor 'x.comfy_quant' in a.safetensors",
  // "header of a.safetensors", "legacy scaled_fp8 in a.safetensors".
  std::string source;
};

// A marker tensor larger than this is refused: real markers are under 200
// bytes, and each is parsed into memory whole.
inline constexpr size_t kMaxMarkerBytes = 64 * 1024;
// The same for the header's whole _quantization_metadata (one entry per
// layer: about 100 bytes each, so room for >100k layers).
inline constexpr size_t kMaxQuantizationMetadataBytes = 16u << 20;

// The marker parameter mixq sets on the markers SGLang's global MXFP8 rule
// implies: "linear" (row-major [N, K/32] block exponents). Marked mxfp8 layers
// store swizzled exponents (ComfyUI's layout) and never carry the key: a file
// marker that sets it is ignored with a warning.
inline constexpr std::string_view kScaleLayoutKey = "_scale_layout";
// True when `params` (a layer's marker parameters) say row-major block scales.
inline bool row_major_scales(const nlohmann::json& params) {
  auto it = params.find(std::string(kScaleLayoutKey));
  return it != params.end() && it->is_string() && it->get_ref<const std::string&>() == "linear";
}

struct MarkerSet {
  std::map<std::string, Marker> markers;  // by prefix
  // Legacy renames: logical tensor name -> stored tensor name
  // ("x.weight_scale" -> "x.scale_weight").
  std::map<std::string, std::string> renamed;
  // Stored tensors consumed by marker collection: marker tensors, the
  // scaled_fp8 sentinel, legacy input scales equal to 1.0.
  std::set<std::string> consumed;
  // By prefix: the keys of Marker::params that were read from the nested
  // "params" object (not given at top level). ComfyUI honours them; SGLang
  // reads only top-level keys, so the sglang profiles ignore these
  // (docs/DISPATCH.md §1.3). Prefixes without nested keys are absent.
  std::map<std::string, std::set<std::string>> nested_keys;
  // The header key `quant_format` over all files, lower-cased (files without
  // it add nothing). SGLang reads nothing else of it: exactly {"mxfp8"} turns
  // on its global MXFP8 rule (every unmarked F8_E4M3 weight with a U8
  // [N, K/32] weight_scale is an mxfp8 layer); ComfyUI ignores the key.
  std::set<std::string> global_quant_formats;
  // Prefixes whose marker that rule implied (no marker in the file). Their
  // Marker::source says so and their params hold kScaleLayoutKey = "linear".
  std::set<std::string> implied;
  std::vector<std::string> warnings;
};

// True when SGLang's global MXFP8 rule is on for these markers' checkpoint.
bool global_mxfp8(const MarkerSet& markers);

// Thrown for a prefix declared twice with different markers; the message
// names both sources. `key_conflict` is true when both declare one key (or
// the format) with different values, which SGLang rejects too ("Conflicting
// Comfy quantization markers", a ValueError); false when they differ only by
// keys one of them lacks (SGLang merges those, mixq still refuses).
class MarkerConflict : public Error {
 public:
  MarkerConflict(const std::string& message, bool key_conflict) : Error(message), key_conflict(key_conflict) {}
  bool key_conflict;
};

// Throws Error for invalid UTF-8, invalid or duplicate-key JSON (every marker
// goes through the strict parser: depth and duplicate keys checked), a marker
// over kMaxMarkerBytes, non-object JSON, a missing or non-string "format", a
// malformed header entry, a NUL byte in a prefix, or MarkerConflict.
MarkerSet collect_markers(const Checkpoint& checkpoint);

// A marker as ComfyUI writes it: Python json.dumps separators (", ", ": "),
// "format" first, other keys sorted (the bytes of a `.comfy_quant` tensor).
std::string marker_json(const nlohmann::json& marker);
// The header value for kHeaderMarkersKey: {"format_version": "1.0", "layers": layers}.
std::string header_markers_json(const nlohmann::json& layers);

}  // namespace mixq
