// The `sglang` profile: SGLang's generic Comfy resolver
// (resolve_comfy_checkpoint_quantization, docs/DISPATCH.md §3.2). The decision
// uses only the sorted SET of declared formats; each accepted set names the
// config SGLang builds and what every declared format must satisfy in it. Any
// other set raises NotImplementedError. Before that, SGLang's header inspection
// (§2.2) runs, and afterwards mixq checks that no layer relies on nested
// "params" keys, which SGLang ignores.
#include <fmt/format.h>

#include "plan/sglang_rules.hpp"

namespace mixq::sglang {
namespace {

using nlohmann::json;

struct Admission {
  std::string_view format;
  std::string (*admit)(const LayerPlan& layer, const json& top);
};

struct SetRule {
  std::vector<std::string_view> formats;  // sorted
  std::string_view config;
  std::vector<Admission> admissions;
};

std::string w4a8_companion(const LayerPlan& layer, const json& top) {
  return int8_embedding_rule(layer, top, "Unsupported Comfy W4A8 format:");
}
std::string nvfp4_companion(const LayerPlan& layer, const json& top) {
  return int8_embedding_rule(layer, top, "Unsupported Comfy NVFP4 companion:");
}

// §3.2, row by row.
const std::vector<SetRule>& set_rules() {
  static const std::vector<SetRule> rules{
      {{}, "none (all layers unquantized)", {}},
      {{"int8_tensorwise"}, "ConvRotInt8Config (convrot_int8, serialized)", {{"int8_tensorwise", int8_convrot_rule}}},
      {{"asym_w4a8_int8"}, "KitchenW4A8Config (kitchen_w4a8)", {{"asym_w4a8_int8", w4a8_rule}}},
      {{"asym_w4a8_int8", "int8_tensorwise"},
       "KitchenW4A8Config (kitchen_w4a8) with INT8 embedding companions",
       {{"asym_w4a8_int8", w4a8_rule}, {"int8_tensorwise", w4a8_companion}}},
      {{"convrot_w4a4"}, "KitchenW4A4Config (kitchen_w4a4)", {{"convrot_w4a4", w4a4_rule}}},
      {{"convrot_w4a4", "int8_tensorwise"},
       "KitchenW4A4Config (kitchen_w4a4) delegating INT8 layers to ConvRotInt8Config",
       {{"convrot_w4a4", w4a4_rule}, {"int8_tensorwise", int8_convrot_rule}}},
      {{"float8_e4m3fn"}, "ComfyFp8Config (comfy_fp8)", {{"float8_e4m3fn", fp8_rule}}},
      {{"nvfp4"}, "ComfyNvfp4Config (comfy_nvfp4)", {{"nvfp4", nvfp4_rule}}},
      {{"int8_tensorwise", "nvfp4"},
       "ComfyNvfp4Config (comfy_nvfp4) with INT8 embedding companions",
       {{"int8_tensorwise", nvfp4_companion}, {"nvfp4", nvfp4_rule}}},
      {{"mxfp8"}, "MXFP8Config (mxfp8, serialized, dynamic activations)", {}},
  };
  return rules;
}

const SetRule* find_rule(const std::vector<std::string>& set) {
  for (const SetRule& rule : set_rules()) {
    if (rule.formats.size() != set.size()) continue;
    bool same = true;
    for (size_t i = 0; i < set.size(); ++i) same = same && rule.formats[i] == set[i];
    if (same) return &rule;
  }
  return nullptr;
}

// The nvfp4 checks of the generic path need the marker view; the admission
// table has them. Applies a row's admissions to every marked layer.
std::string admit_layers(PlanState& state, const std::vector<Admission>& admissions) {
  for (LayerPlan& layer : state.layers) {
    const Marker* marker = state.marker(layer);
    if (!marker) continue;
    for (const Admission& a : admissions) {
      if (a.format != marker->format) continue;
      std::string problem = a.admit(layer, top_level(state.markers, *marker));
      if (problem.empty()) continue;
      layer.reason = raises(kRuntime, "ValueError", problem);
      return layer.reason;
    }
  }
  return {};
}

std::string resolve(PlanState& state) {
  return resolve_generic(state);
}

}  // namespace

std::string resolve_generic(PlanState& state) {
  if (std::string problem = inspect_all(state); !problem.empty()) return problem;
  const std::vector<std::string> set = format_set(state.markers);
  const SetRule* rule = find_rule(set);
  if (!rule) {
    const std::string message =
        raises(kRuntime, "NotImplementedError", fmt::format("Unsupported Comfy quantization format(s): {}", join(set)));
    for (LayerPlan& layer : state.layers)
      if (!layer.format_name().empty() && layer.reason.empty()) layer.reason = message;
    return message;
  }
  if (std::string problem = admit_layers(state, rule->admissions); !problem.empty()) return problem;
  if (std::string problem = nested_params_problem(state); !problem.empty())
    return fmt::format("sglang would silently misread a marker: {}", problem);
  state.config = std::string(rule->config);
  if (!state.markers.implied.empty())
    state.warnings.push_back(fmt::format(
        "risk: {} layer(s) are mxfp8 only by the header's quant_format, with row-major [N, K/32] block exponents "
        "(as SGLang's SRT MXFP8 path reads them); sglang 0.5.x runs them with ComfyMXFP8LinearMethod, which on "
        "its FlashInfer cutlass/cutedsl MXFP8 backends takes the scale bytes as already swizzled "
        "(comfy-kitchen's layout) and would decode other weights: check the backend",
        state.markers.implied.size()));
  return {};
}

}  // namespace mixq::sglang

namespace mixq {

const Profile& sglang_profile() {
  static const Profile profile{"sglang", sglang::method, sglang::accounting, sglang::resolve,
                               sglang::input_partition, nullptr, sglang::marker_conflict};
  return profile;
}

}  // namespace mixq
