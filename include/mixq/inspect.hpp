#pragma once
// The data behind `mixq inspect`: files, layers, other tensors, per-format
// totals and warnings, as the JSON object of docs/CLI.md.
#include <nlohmann/json.hpp>

#include "mixq/checkpoint.hpp"
#include "mixq/layer.hpp"

namespace mixq {

// Reads headers only (plus marker tensors and legacy input scales).
// `other_tensor_count` is always there; the `other_tensors` list only with
// `list_other_tensors` (the text table prints the count: a header may list
// millions of small tensors, each ~300 bytes as JSON).
nlohmann::json inspect_report(const Checkpoint& checkpoint, bool list_other_tensors = true);
// The same from already grouped layers.
nlohmann::json inspect_report(const Checkpoint& checkpoint, const MarkerSet& markers,
                              const LayerSet& layers, bool list_other_tensors = true);

}  // namespace mixq
