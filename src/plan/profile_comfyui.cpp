// The `comfyui` profile (docs/DISPATCH.md §3.1): every Linear decides alone, so
// any mixture of formats loads; defaults as ComfyUI applies them
// (convrot_groupsize 256, nested "params" honoured, legacy scaled_fp8 files
// converted). What ComfyUI rejects, and how:
// - an unknown format: KeyError from the QUANT_ALGOS lookup;
// - scale tensors without markers: RuntimeError "unrecognized quantization
//   scale tensors" (newer ComfyUI);
// - embeddings honour only float8_* and int8_tensorwise markers; others would
//   be put back into the state dict and the packed bytes loaded as the table.
// - the header's quant_format (SGLang's global MXFP8 rule) means nothing to
//   ComfyUI: such layers have no marker there, and their scales are refused
//   as above (older ComfyUI loads the FP8 codes without them).
// ComfyUI has no tensor parallelism: --tp checks mixq's layout rule only.
#include <algorithm>
#include <array>

#include <fmt/format.h>

#include "plan/profile.hpp"

namespace mixq {
namespace {

constexpr std::string_view kRuntime = "comfyui";

// ComfyUI's QUANT_ALGOS (§2.1): names ComfyUI knows even where mixq has no record.
constexpr std::array<std::string_view, 8> kQuantAlgos{
    "float8_e4m3fn", "float8_e5m2", "nvfp4", "mxfp8", "int8_tensorwise", "convrot_w4a4",
    "asym_w4a8_int8", "awq_w4a16"};
// Formats ComfyUI honours on embeddings (per-row gather).
constexpr std::array<std::string_view, 3> kEmbeddingFormats{"float8_e4m3fn", "float8_e5m2", "int8_tensorwise"};

template <size_t N>
bool contains(const std::array<std::string_view, N>& names, std::string_view name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

// FP8 without input_scale: ComfyUI's FP8 layout quantizes the activation with
// a static scale of 1.0, where the record's name (SGLang's view) says dynamic.
std::string method(const PlanState& state, const LayerPlan& layer, std::string base) {
  if (state.markers.implied.count(layer.prefix())) return "unmarked";  // quant_format is not read
  if (base == "fp8:dynamic") return "fp8:unit_scale";
  return base;
}

// Layers marked only by the header's quant_format: ComfyUI sees no marker.
std::string quant_format_problem(PlanState& state) {
  std::vector<std::string> scales;
  LayerPlan* first = nullptr;
  for (LayerPlan& layer : state.layers) {
    if (!state.markers.implied.count(layer.prefix())) continue;
    if (!first) first = &layer;
    scales.push_back(layer.prefix() + ".weight_scale");
  }
  if (!first) return {};
  const std::string message = fmt::format(
      "comfyui ignores the header's quant_format \"mxfp8\", so {} layer(s) have no comfy_quant marker there: {} "
      "(older ComfyUI loads their F8_E4M3 codes as plain weights without the block scales)",
      scales.size(),
      raises(kRuntime, "RuntimeError", fmt::format("unrecognized quantization scale tensors: {}", py_list(scales))));
  for (LayerPlan& layer : state.layers)
    if (state.markers.implied.count(layer.prefix()) && layer.reason.empty()) layer.reason = message;
  return message;
}

std::string accounting(const PlanState& state, const Accounting& found) {
  if (std::string m = orphan_message(found); !m.empty()) return m;
  // Newer ComfyUI refuses scale tensors of layers that carry no marker.
  std::vector<std::string> unmarked_scales;
  for (const std::string& name : found.unclaimed) {
    const size_t dot = name.rfind('.');
    const std::string prefix = dot == std::string::npos ? std::string() : name.substr(0, dot);
    if (!state.markers.markers.count(prefix)) unmarked_scales.push_back(name);
  }
  if (!unmarked_scales.empty())
    return raises(kRuntime, "RuntimeError",
                  fmt::format("unrecognized quantization scale tensors: {}", py_list(unmarked_scales)));
  if (!found.missing_markers.empty())
    return fmt::format(
        "quantized weights without a comfy_quant marker: {} (comfyui would load the raw integers or "
        "codes as plain weights cast to the compute dtype; mixq refuses)",
        py_list(found.missing_markers));
  return unclaimed_message(found);
}

std::string resolve(PlanState& state) {
  if (std::string problem = quant_format_problem(state); !problem.empty()) return problem;
  for (LayerPlan& layer : state.layers) {
    const std::string format = layer.format_name();
    if (format.empty()) continue;
    if (!layer.layer.format) {
      layer.reason = contains(kQuantAlgos, format)
                         ? fmt::format("mixq has no record for format '{}' (comfyui supports it)", format)
                         : raises(kRuntime, "KeyError", fmt::format("'{}'", format));
      return fmt::format("layer '{}' (marker from {}): {}", layer.prefix(), layer.layer.marker_source,
                         layer.reason);
    }
    if (layer.embedding && !contains(kEmbeddingFormats, format)) {
      layer.reason = fmt::format(
          "comfyui honours only float8_e4m3fn, float8_e5m2 and int8_tensorwise markers on embeddings, "
          "not {}",
          format);
      return fmt::format("embedding '{}': {}", layer.prefix(), layer.reason);
    }
  }
  if (!state.markers.markers.empty()) state.config = "mixed_precision_ops (quant_config {\"mixed_ops\": true})";
  return {};
}

}  // namespace

const Profile& comfyui_profile() {
  static const Profile profile{kRuntime, method, accounting, resolve, nullptr, nullptr, nullptr};
  return profile;
}

}  // namespace mixq
