// SGLang's per-config admission rules (docs/DISPATCH.md §2.3, §3.4), its
// tensor-parallel checks (§4.1, §4.2), and how it reads markers (top-level keys
// only, §1.3). Shared by the sglang and sglang-minimax-h3 profiles.
#include <algorithm>
#include <array>
#include <cctype>
#include <set>

#include <fmt/format.h>

#include "mixq/error.hpp"
#include "mixq/format.hpp"
#include "plan/sglang_rules.hpp"

namespace mixq::sglang {
namespace {

using nlohmann::json;

bool top_true(const json& top, const char* key) {
  auto it = top.find(key);
  return it != top.end() && it->is_boolean() && it->get<bool>();
}

std::string found(const json& top, const char* key) {
  auto it = top.find(key);
  return it == top.end() ? std::string("absent") : it->dump();
}

// An integer parameter after defaults (the layer's params), or `fallback`.
int64_t param_or(const Layer& layer, const char* key, int64_t fallback) {
  auto it = layer.params.find(key);
  return it != layer.params.end() && it->is_number_integer() ? it->get<int64_t>() : fallback;
}

bool param_true(const Layer& layer, const char* key) { return top_true(layer.params, key); }

std::string value_error(std::string_view message) { return raises(kRuntime, "ValueError", message); }

}  // namespace

const std::set<std::string>& nested_keys(const MarkerSet& markers, const Marker& marker) {
  static const std::set<std::string> none;
  auto it = markers.nested_keys.find(marker.prefix);
  return it == markers.nested_keys.end() ? none : it->second;
}

json top_level(const MarkerSet& markers, const Marker& marker) {
  const std::set<std::string>& nested = nested_keys(markers, marker);
  json top = json::object();
  for (const auto& [key, value] : marker.params.items())
    if (!nested.count(key)) top[key] = value;
  return top;
}

std::vector<std::string> format_set(const MarkerSet& markers) {
  std::set<std::string> names;
  for (const auto& [prefix, marker] : markers.markers) names.insert(marker.format);
  return {names.begin(), names.end()};
}

std::string join(const std::vector<std::string>& names) {
  std::string text;
  for (const std::string& name : names) text += (text.empty() ? "" : ", ") + name;
  return text;
}

std::string int8_convrot_rule(const LayerPlan& layer, const json& top) {
  if (!top_true(top, "convrot"))
    return fmt::format("Comfy INT8 layer '{}' must set convrot=true for the serialized ConvRot INT8 method "
                       "(found convrot={})",
                       layer.prefix(), found(top, "convrot"));
  auto group = top.find("convrot_groupsize");
  const bool valid = group != top.end() && group->is_number_integer() &&
                     (*group == 16 || *group == 64 || *group == 256);
  if (!valid)
    return fmt::format("Comfy INT8 layer '{}' must declare convrot_groupsize in (16, 64, 256) (found {})",
                       layer.prefix(), found(top, "convrot_groupsize"));
  return {};
}

std::string int8_embedding_rule(const LayerPlan& layer, const json& top, std::string_view unsupported) {
  if (!layer.embedding)
    return fmt::format("{} int8_tensorwise on linear layer '{}': INT8 is accepted only as an embedding "
                       "companion (non-convrot, row-wise or scalar)",
                       unsupported, layer.prefix());
  if (top_true(top, "convrot"))
    return fmt::format("{} int8_tensorwise on embedding '{}': embedding companions must not be rotated "
                       "(convrot=true)",
                       unsupported, layer.prefix());
  return {};
}

std::string fp8_rule(const LayerPlan& layer, const json& top) {
  if (top_true(top, "full_precision_matrix_mult") && layer.parts > 1)
    return fmt::format("ComfyFullPrecisionFp8 does not support fused linears: '{}' fuses {} outputs",
                       layer.prefix(), layer.parts);
  return {};
}

std::string nvfp4_rule(const LayerPlan& layer, const json& top) {
  if (top_true(top, "convrot")) return fmt::format("Rotated NVFP4 weights are not supported ('{}')", layer.prefix());
  if (top_true(top, "full_precision_matrix_mult") && layer.parts > 1)
    return fmt::format("Comfy full-precision NVFP4 does not support fused linears: '{}' fuses {} outputs",
                       layer.prefix(), layer.parts);
  return {};
}

std::string w4a4_rule(const LayerPlan& layer, const json& top) {
  const json dtype = top.value("linear_dtype", json("int4"));
  if (dtype != "int4" && dtype != "int8")
    return fmt::format("Unsupported Comfy W4A4 linear_dtype {} for '{}' (expected int4 or int8)", dtype.dump(),
                       layer.prefix());
  return {};
}

std::string w4a8_rule(const LayerPlan& layer, const json& top) {
  if (!top_true(top, "convrot"))
    return fmt::format("Unsupported Comfy W4A8 format for '{}': asym_w4a8_int8 must set convrot=true (found "
                       "convrot={})",
                       layer.prefix(), found(top, "convrot"));
  return {};
}

std::string nested_params_problem(const PlanState& state) {
  for (const auto& [prefix, marker] : state.markers.markers) {
    const std::set<std::string>& nested = nested_keys(state.markers, marker);
    if (nested.empty()) continue;
    const FormatTraits* format = find_format(marker.format);
    if (!format) continue;
    const json sglang_view = apply_defaults(*format, top_level(state.markers, marker));
    const json comfy_view = apply_defaults(*format, marker.params);
    for (const std::string& key : nested) {
      const json theirs = sglang_view.contains(key) ? sglang_view[key] : json(nullptr);
      if (theirs == comfy_view[key]) continue;
      return fmt::format(
          "layer '{}' declares {}={} inside the nested \"params\" object, which sglang ignores (it reads "
          "top-level keys only and would use {}={}): the layer would run with other parameters than it "
          "was written with",
          prefix, key, comfy_view[key].dump(), key, theirs.is_null() ? "nothing" : theirs.dump());
    }
  }
  return {};
}

std::string method(const PlanState& state, const LayerPlan& layer, std::string base) {
  const Marker* marker = state.marker(layer);
  if (marker && !nested_keys(state.markers, *marker).empty() && layer.layer.format && layer.layer.format->method) {
    Layer view = layer.layer;
    view.params = apply_defaults(*view.format, top_level(state.markers, *marker));
    try {
      base = view.format->method(view);
    } catch (const Error&) {
      // keep the record's name; the rules report the parameter
    }
  }
  // The generic Comfy NVFP4 path ignores input_scale: global activation scale per call.
  if (base == "nvfp4" && layer.layer.find("input_scale")) return "nvfp4:dynamic";
  return base;
}

// Python's repr of SGLang's (dtype, shape) metadata tuple: ('U8', (4, 2)).
static std::string py_meta(const TensorView* t) {
  if (!t) return "None";
  std::string shape = "(";
  for (size_t i = 0; i < t->shape.size(); ++i) shape += (i ? ", " : "") + std::to_string(t->shape[i]);
  if (t->shape.size() == 1) shape += ",";
  shape += ")";
  return fmt::format("('{}', {})", dtype_name(t->dtype), shape);
}

std::string global_mxfp8_problem(const PlanState& state) {
  if (!global_mxfp8(state.markers)) return {};
  const Checkpoint& ckpt = state.checkpoint;
  for (const TensorView& weight : ckpt.tensors()) {
    const std::string_view name = weight.name;
    constexpr std::string_view kWeight = ".weight";
    if (name.size() <= kWeight.size() || name.substr(name.size() - kWeight.size()) != kWeight) continue;
    if (weight.dtype != DType::F8_E4M3 && weight.dtype != DType::I8 && weight.dtype != DType::U8) continue;
    const std::string prefix(name.substr(0, name.size() - kWeight.size()));
    const TensorView* scale = ckpt.find(prefix + ".weight_scale");
    const bool fits = weight.dtype == DType::F8_E4M3 && weight.rank() == 2 && weight.shape[1] % 32 == 0 && scale &&
                      scale->dtype == DType::U8 && scale->shape == Shape{weight.shape[0], weight.shape[1] / 32};
    if (fits) continue;
    const std::string message =
        value_error(fmt::format("MXFP8 layer '{}' has incompatible weight/scale metadata: {} and {} (the header's "
                                "quant_format \"mxfp8\" applies SGLang's global MXFP8 rule to every F8_E4M3, I8 "
                                "and U8 weight)",
                                prefix, py_meta(&weight), py_meta(scale)));
    for (LayerPlan& layer : state.layers)
      if (layer.prefix() == prefix && layer.reason.empty()) layer.reason = message;
    return message;
  }
  return {};
}

std::string marker_conflict(const MarkerConflict& conflict) {
  if (conflict.key_conflict) return value_error(conflict.what());
  return fmt::format("{} (sglang would merge these two markers; mixq refuses markers that differ)", conflict.what());
}

std::string accounting(const PlanState& state, const Accounting& found) {
  if (std::string m = orphan_message(found); !m.empty()) return m;
  if (std::string m = global_mxfp8_problem(state); !m.empty()) return m;
  if (!found.missing_markers.empty())
    return value_error(fmt::format("Quantized weights are missing comfy_quant metadata: {}",
                                   py_list(found.missing_markers, 5)));
  return unclaimed_message(found);
}

namespace {

// §4.1/§4.2: what each of SGLang's linear methods checks when it creates a
// row-parallel shard of x input features. One row per format; formats SGLang
// creates without such a check have no row.
std::string int8_partition(const LayerPlan& entry, int64_t x) {
  if (!param_true(entry.layer, "convrot")) return {};
  const int64_t g = param_or(entry.layer, "convrot_groupsize", 256);
  if (g > 0 && x % g != 0)
    return value_error(fmt::format("ConvRot INT8 layer '{}' needs input_size_per_partition ({}) divisible "
                                   "by group_size {}",
                                   entry.prefix(), x, g));
  return {};
}

std::string w4a4_partition(const LayerPlan& entry, int64_t x) {
  const int64_t g = param_or(entry.layer, "convrot_groupsize", 256);
  if (g > 0 && x % g != 0)
    return value_error(fmt::format("W4A4 needs input_size_per_partition ({}) divisible by ConvRot group "
                                   "size {} ('{}')",
                                   x, g, entry.prefix()));
  if (x % 64 != 0)
    return value_error(fmt::format("W4A4 needs input_size_per_partition ({}) divisible by quantization "
                                   "group size 64 ('{}')",
                                   x, entry.prefix()));
  return {};
}

std::string w4a8_partition(const LayerPlan& entry, int64_t x) {
  const int64_t gs = param_or(entry.layer, "group_size", 16);
  const int64_t g = param_or(entry.layer, "convrot_groupsize", 256);
  if (gs < 4 || !(16 % gs == 0 || gs % 16 == 0) || x % 16 != 0 || x % gs != 0)
    return value_error(fmt::format("W4A8 '{}' does not admit input_size_per_partition ({}) with group_size {}",
                                   entry.prefix(), x, gs));
  if (g > 0 && x % g != 0)
    return value_error(fmt::format("W4A8 needs input_size_per_partition ({}) divisible by ConvRot group "
                                   "size {} ('{}')",
                                   x, g, entry.prefix()));
  return {};
}

std::string nvfp4_partition(const LayerPlan& entry, int64_t x) {
  if (x % 16 != 0)
    return value_error(fmt::format("Unsupported model when input features size is {}, not multiple of 16, "
                                   "for NVFP4 quantization ('{}')",
                                   x, entry.prefix()));
  return {};
}

std::string mxfp8_partition(const LayerPlan& entry, int64_t x) {
  if (x % 32 != 0)
    return value_error(fmt::format("Weight input_size_per_partition = {} is not divisible by weight "
                                   "quantization block_k = 32 ('{}')",
                                   x, entry.prefix()));
  return {};
}

struct PartitionRule {
  std::string_view format;
  std::string (*check)(const LayerPlan& entry, int64_t in_per_partition);
};

constexpr std::array<PartitionRule, 5> kPartitionRules{{
    {"int8_tensorwise", int8_partition},
    {"convrot_w4a4", w4a4_partition},
    {"asym_w4a8_int8", w4a8_partition},
    {"nvfp4", nvfp4_partition},
    {"mxfp8", mxfp8_partition},
}};

}  // namespace

std::string input_partition(const LayerPlan& entry, int64_t x) {
  const std::string format = entry.format_name();
  for (const PartitionRule& rule : kPartitionRules)
    if (rule.format == format) return rule.check(entry, x);
  return {};
}

}  // namespace mixq::sglang
