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
  std::vector<std::string> warnings;
};

// Throws Error for invalid UTF-8, non-object JSON, a missing or non-string
// "format", a malformed header entry, or one prefix declared twice with
// different markers (the message names both sources).
MarkerSet collect_markers(const Checkpoint& checkpoint);

// A marker as ComfyUI writes it: Python json.dumps separators (", ", ": "),
// "format" first, other keys sorted (the bytes of a `.comfy_quant` tensor).
std::string marker_json(const nlohmann::json& marker);
// The header value for kHeaderMarkersKey: {"format_version": "1.0", "layers": layers}.
std::string header_markers_json(const nlohmann::json& layers);

}  // namespace mixq
