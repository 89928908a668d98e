#pragma once
// Internal interface of the runtime profiles. A profile never changes the plan
// itself (layers, tensors, parameters): it decides acceptance, names the
// method where its runtime runs a layer differently from the format record,
// and adds its own tensor-parallel rules. One file per profile.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "mixq/plan.hpp"

namespace mixq {

// What the strict accounting found (accounting.cpp). All lists sorted.
struct Accounting {
  std::vector<std::string> orphan_markers;    // marker prefixes without a weight tensor
  std::vector<std::string> missing_markers;   // prefixes of I8/U8/F8 weights without a marker
  std::vector<std::string> unclaimed;         // companion-looking tensors no layer claimed
  bool any_marker = false;
};

// The plan under construction, as a profile sees it.
struct PlanState {
  const Checkpoint& checkpoint;
  const MarkerSet& markers;
  std::vector<LayerPlan>& layers;
  std::string config;  // the runtime configuration a profile resolved to
  std::vector<std::string> warnings;  // risks a profile found (added to the plan's warnings)

  // nullptr for unmarked layers.
  const Marker* marker(const LayerPlan& layer) const;
};

struct Profile {
  std::string_view name;
  // Renames the format record's method where this runtime runs the layer
  // differently (called for valid, non-embedding layers only).
  std::string (*method)(const PlanState& state, const LayerPlan& layer, std::string base) = nullptr;
  // Turns a non-empty accounting into the rejection message.
  std::string (*accounting)(const PlanState& state, const Accounting& found) = nullptr;
  // Acceptance once accounting passed: empty, or the rejection message. May set
  // state.config and LayerPlan::reason of the layers it blames.
  std::string (*resolve)(PlanState& state) = nullptr;
  // This runtime's row-parallel checks, run before the format's tp_input_unit
  // rule (empty = admitted). May be null.
  std::string (*input_partition)(const LayerPlan& layer, int64_t in_per_partition) = nullptr;
  // Extra whole-layer rule for a tp degree (e.g. attention heads). May be null.
  std::string (*tp_rule)(const LayerPlan& layer, int tp) = nullptr;
  // Phrases a marker conflict (collect_markers) in this runtime's words. May
  // be null: the message as mixq words it.
  std::string (*marker_conflict)(const MarkerConflict& conflict) = nullptr;
};

const Profile& comfyui_profile();
const Profile& sglang_profile();
const Profile& sglang_minimax_h3_profile();
// nullptr for an unknown name.
const Profile* find_profile(std::string_view name);

// Strict accounting of markers, weights and companion tensors.
Accounting account(const MarkerSet& markers, const LayerSet& layers);
// Shared phrasing of the accounting failures, in the order checked
// (orphans, missing markers, unclaimed tensors); empty when all is claimed.
std::string orphan_message(const Accounting& found);
std::string unclaimed_message(const Accounting& found);

// Layer roles from module names (topology.cpp).
bool is_embedding_name(std::string_view prefix);
void classify_parallel(std::string_view prefix, Parallel& parallel, int& parts);

// "sglang would raise ValueError: <message>"
std::string raises(std::string_view runtime, std::string_view kind, std::string_view message);
// A Python-style list of the first `max` names: ['a', 'b'] (+ "and N more").
std::string py_list(const std::vector<std::string>& items, size_t max = 20);

}  // namespace mixq
