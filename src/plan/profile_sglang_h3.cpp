// The `sglang-minimax-h3` profile: SGLang's MiniMax-H3 resolver
// (resolve_minimax_h3_checkpoint_quantization, docs/DISPATCH.md §3.3).
// With nvfp4 in the format set, SGLang builds a ModelOpt FP4 config, forces
// the Comfy layout flags (swizzled block scales, nibble swap, native QKV rows)
// and dispatches INT8 (ConvRot) and FP8 layers to inner configs; any other
// companion raises NotImplementedError. Without nvfp4 it falls back to the
// generic resolver. Separate q/k/v projections must form complete triples with
// one marker (§3.5). H3 tensor parallelism also needs whole attention heads per
// rank (head_dim 128, §4.4).
#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>

#include "plan/sglang_rules.hpp"

namespace mixq {
namespace {

using nlohmann::json;

constexpr int64_t kHeadDim = 128;
constexpr std::string_view kNvfp4 = "nvfp4";
// Companions the H3 NVFP4 path can dispatch, with the inner config's rule.
struct Companion {
  std::string_view format;
  std::string_view config;
  std::string (*admit)(const LayerPlan&, const json&);
};
const Companion kCompanions[] = {
    {"int8_tensorwise", "ConvRotInt8Config", sglang::int8_convrot_rule},
    {"float8_e4m3fn", "ComfyFp8Config", sglang::fp8_rule},
};

bool nvfp4_declared(const MarkerSet& markers) {
  const std::vector<std::string> set = sglang::format_set(markers);
  return std::find(set.begin(), set.end(), kNvfp4) != set.end();
}

// ModelOptFp4LinearMethod: activation global scale from input_scale, or 1.0
// when it is missing (missing_param_init = ones); full_precision_matrix_mult is
// not read on this path.
std::string method(const PlanState& state, const LayerPlan& layer, std::string base) {
  const Marker* marker = state.marker(layer);
  if (marker && marker->format == kNvfp4 && nvfp4_declared(state.markers))
    return layer.layer.find("input_scale") ? "nvfp4" : "nvfp4:unit_scale";
  return sglang::method(state, layer, std::move(base));
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// Separate q/k/v projections (§3.5): the H3 loader merges
// `...attn.{q,k,v}_proj` into `...attn.qkv_proj`, so they must come as
// complete triples, and their markers must agree once mapped onto one prefix.
std::string separate_qkv_problem(PlanState& state) {
  constexpr std::string_view kParts[] = {"q_proj", "k_proj", "v_proj"};
  std::map<std::string, std::vector<const LayerPlan*>> triples;  // "<...>.attn." -> q, k, v
  for (const LayerPlan& layer : state.layers) {
    for (size_t i = 0; i < 3; ++i) {
      const std::string suffix = "attn." + std::string(kParts[i]);
      if (!ends_with(layer.prefix(), suffix)) continue;
      auto& slot = triples[layer.prefix().substr(0, layer.prefix().size() - kParts[i].size())];
      slot.resize(3, nullptr);
      slot[i] = &layer;
    }
  }
  for (const auto& [base, parts] : triples) {
    std::string found;
    for (size_t i = 0; i < 3; ++i)
      if (parts[i]) found += (found.empty() ? "" : ", ") + std::string(kParts[i]);
    if (!parts[0] || !parts[1] || !parts[2])
      return raises(sglang::kRuntime, "ValueError",
                    fmt::format("separate QKV layer '{}qkv_proj' expected q, k, and v projections, found {}",
                                base, found));
    const Marker* q = state.marker(*parts[0]);
    for (size_t i = 1; i < 3; ++i) {
      const Marker* other = state.marker(*parts[i]);
      const bool same = (!q && !other) || (q && other && q->format == other->format && q->params == other->params);
      if (!same)
        return raises(sglang::kRuntime, "ValueError",
                      fmt::format("Comfy markers collide after parameter mapping: '{}' and '{}' both map to "
                                  "'{}qkv_proj' with different markers",
                                  parts[0]->prefix(), parts[i]->prefix(), base));
    }
  }
  return {};
}

std::string resolve(PlanState& state) {
  if (std::string problem = separate_qkv_problem(state); !problem.empty()) return problem;
  if (!nvfp4_declared(state.markers)) return sglang::resolve_generic(state);
  if (std::string problem = sglang::inspect_all(state); !problem.empty()) return problem;

  std::vector<std::string> unsupported;
  for (const std::string& format : sglang::format_set(state.markers)) {
    bool known = format == kNvfp4;
    for (const Companion& c : kCompanions) known = known || c.format == format;
    if (!known) unsupported.push_back(format);
  }
  if (!unsupported.empty()) {
    const std::string message = raises(sglang::kRuntime, "NotImplementedError",
                                       fmt::format("Unsupported Comfy NVFP4 companion format(s): {}",
                                                   sglang::join(unsupported)));
    for (LayerPlan& layer : state.layers)
      if (std::find(unsupported.begin(), unsupported.end(), layer.format_name()) != unsupported.end())
        layer.reason = message;
    return message;
  }

  // The group size SGLang infers (K / scale columns of the first NVFP4 module)
  // is always 16 here: inspection already required a [N, K/16] block scale.
  std::string inner;
  for (const Companion& c : kCompanions) {
    size_t count = 0;
    for (LayerPlan& layer : state.layers) {
      const Marker* marker = state.marker(layer);
      if (!marker || marker->format != c.format) continue;
      ++count;
      std::string problem = c.admit(layer, sglang::top_level(state.markers, *marker));
      if (problem.empty()) continue;
      layer.reason = raises(sglang::kRuntime, "ValueError", problem);
      return layer.reason;
    }
    if (count) inner += fmt::format(" + {} for {} {} layer(s)", c.config, count, c.format);
  }
  if (std::string problem = sglang::nested_params_problem(state); !problem.empty())
    return fmt::format("sglang would silently misread a marker: {}", problem);
  state.config =
      "ModelOptFp4Config (group 16; forced: comfy quantization, native QKV layout, swizzled weight scales, "
      "nibble swap)" +
      inner;
  return {};
}

// Every rank needs whole attention heads: the q, k and v parts of a fused
// qkv_proj hold heads of 128 rows each (56 heads in the full model).
std::string tp_rule(const LayerPlan& layer, int tp) {
  const bool separate = ends_with(layer.prefix(), "attn.q_proj") || ends_with(layer.prefix(), "attn.k_proj") ||
                        ends_with(layer.prefix(), "attn.v_proj");
  if (layer.parallel != Parallel::column || (layer.parts != 3 && !separate)) return {};
  const int64_t part = layer.layer.out_features / layer.parts;
  if (part % kHeadDim != 0) return {};
  const int64_t heads = part / kHeadDim;
  if (heads % tp != 0)
    return fmt::format("tp {} does not divide the {} attention heads of '{}' ({} rows per part / head_dim {})",
                       tp, heads, layer.prefix(), part, kHeadDim);
  return {};
}

}  // namespace

const Profile& sglang_minimax_h3_profile() {
  static const Profile profile{"sglang-minimax-h3", method, sglang::accounting, resolve,
                               sglang::input_partition, tp_rule, sglang::marker_conflict};
  return profile;
}

}  // namespace mixq
