#pragma once
// Linear layers of a checkpoint: tensors grouped by prefix and bound to the
// format their marker declares (or to the "unquantized" record).
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "mixq/checkpoint.hpp"
#include "mixq/marker.hpp"

namespace mixq {

struct FormatTraits;

struct Layer {
  std::string prefix;
  // The format record; never null for a known format, the "unquantized"
  // record for layers without a marker, null only for an unknown format name
  // (then `problem` says so and `declared_format` holds the name).
  const FormatTraits* format = nullptr;
  std::string declared_format;
  // Marker parameters with the format's defaults applied ("format" excluded).
  nlohmann::json params = nlohmann::json::object();
  std::string marker_source;  // empty for unmarked layers
  // Bound tensors by role: "weight", "bias", "weight_scale", ... (the suffix
  // after "<prefix>."; aliases already mapped to the canonical role).
  std::map<std::string, TensorView> tensors;
  // Logical (unpadded) [out, in]; stored sizes when the format cannot tell.
  int64_t out_features = 0;
  int64_t in_features = 0;
  // > 0 when in_features is a padded stored K (LogicalShape::k_pad_unit): an
  // input may then omit up to k_pad_unit - 1 trailing columns, which are zeros.
  int64_t k_pad_unit = 0;
  // Empty when the layer validated; else the validation error's message.
  std::string problem;
  // Non-fatal findings, each naming the layer ("layer 'x': nvfp4 pads N ...").
  std::vector<std::string> warnings;

  const TensorView* find(std::string_view role) const;
  // Throws Error naming the layer when the role is not bound.
  const TensorView& tensor(std::string_view role) const;
  // Parameter accessors with the layer named in type errors.
  bool param_bool(std::string_view key) const;
  int64_t param_int(std::string_view key) const;
  std::string param_string(std::string_view key) const;
  // Bytes of all bound tensors.
  uint64_t bytes() const;
};

struct LayerSet {
  std::vector<Layer> layers;               // sorted by prefix
  // Tensors no layer claimed, by (logical) name; they point into the
  // Checkpoint, which must outlive the set (so do the layers' views).
  std::vector<const TensorView*> other_tensors;
  std::vector<std::string> warnings;
};

// Groups tensors into layers: every marked prefix, and every prefix with a 2-D
// `.weight`. Marked layers claim their format's companions; every layer claims
// its `.bias`. Each layer is validated by its format (failures land in
// Layer::problem, not exceptions). A weight stored as I8, U8, F8_E4M3 or
// F8_E5M2 without a marker gets a warning.
LayerSet group_layers(const Checkpoint& checkpoint, const MarkerSet& markers);

// Validates one layer against its format: fills out_features/in_features and
// warnings, throws Error on failure. (group_layers calls it; writers too.)
void validate_layer(Layer& layer);

}  // namespace mixq
