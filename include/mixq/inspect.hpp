#pragma once
// The data behind `mixq inspect`: files, layers, other tensors, per-format
// totals and warnings, as the JSON object of docs/CLI.md.
#include <nlohmann/json.hpp>

#include "mixq/checkpoint.hpp"
#include "mixq/layer.hpp"

namespace mixq {

// Reads headers only (plus marker tensors and legacy input scales).
nlohmann::json inspect_report(const Checkpoint& checkpoint);
// The same from already grouped layers.
nlohmann::json inspect_report(const Checkpoint& checkpoint, const MarkerSet& markers,
                              const LayerSet& layers);

}  // namespace mixq
