#pragma once
// Rules shared by the `sglang` and `sglang-minimax-h3` profiles: SGLang's view
// of a marker (top-level keys only), its header inspection (docs/DISPATCH.md
// §2.2), the per-layer admission of each of its configs (§3.4) and its
// tensor-parallel checks (§4.1, §4.2). Messages are SGLang's, without the
// "sglang would raise <Kind>: " lead, which the callers add.
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "plan/profile.hpp"

namespace mixq::sglang {

inline constexpr std::string_view kRuntime = "sglang";

// The marker as SGLang reads it: top-level keys only ("params" nesting ignored).
nlohmann::json top_level(const MarkerSet& markers, const Marker& marker);
// Keys of the marker given only inside "params" (empty set when none).
const std::set<std::string>& nested_keys(const MarkerSet& markers, const Marker& marker);
// The sorted set of declared format names.
std::vector<std::string> format_set(const MarkerSet& markers);
// "a, b"
std::string join(const std::vector<std::string>& names);

// Inspection of every marked layer (§2.2), and legacy scaled_fp8 declarations
// (which SGLang does not read): empty, or the full rejection message.
std::string inspect_all(PlanState& state);
// One layer's inspection; empty when it passes. Formats SGLang does not
// inspect pass untouched (they fail later, at resolution).
std::string inspect(const LayerPlan& layer, const nlohmann::json& top);

// Per-layer admission (ValueError messages); empty = admitted.
std::string int8_convrot_rule(const LayerPlan& layer, const nlohmann::json& top);
std::string int8_embedding_rule(const LayerPlan& layer, const nlohmann::json& top,
                                std::string_view unsupported);
std::string fp8_rule(const LayerPlan& layer, const nlohmann::json& top);
std::string nvfp4_rule(const LayerPlan& layer, const nlohmann::json& top);
std::string w4a4_rule(const LayerPlan& layer, const nlohmann::json& top);
std::string w4a8_rule(const LayerPlan& layer, const nlohmann::json& top);

// Marker keys a layer declares only inside "params" whose value differs from
// what SGLang would use (its top-level view with the record's defaults):
// SGLang would run such a layer with other parameters, silently. Empty = none.
std::string nested_params_problem(const PlanState& state);

// The record's method computed from SGLang's view of the marker.
std::string method(const PlanState& state, const LayerPlan& layer, std::string base);
std::string accounting(const PlanState& state, const Accounting& found);
// §4.1/§4.2 row-parallel checks in SGLang's words.
std::string input_partition(const LayerPlan& layer, int64_t in_per_partition);

// The generic resolver (§3.2); also the H3 fallback without nvfp4.
std::string resolve_generic(PlanState& state);

// SGLang's global MXFP8 rule (header quant_format exactly {"mxfp8"}): every
// weight stored as F8_E4M3, I8 or U8, marked or not, must be a 2-D F8_E4M3
// [N, K] with K % 32 == 0 and a U8 weight_scale of exactly [N, K/32], else
// ValueError "MXFP8 layer ... has incompatible weight/scale metadata". Empty
// when the rule is off or every weight fits; else the full rejection message.
std::string global_mxfp8_problem(const PlanState& state);

// A conflicting marker in SGLang's words (its ValueError) when SGLang would
// raise too; mixq's own message when SGLang would merge the two.
std::string marker_conflict(const MarkerConflict& conflict);

}  // namespace mixq::sglang
