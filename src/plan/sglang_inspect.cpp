// SGLang's header inspection of marked layers (docs/DISPATCH.md §2.2): stricter
// than the format records, which follow ComfyUI (e.g. SGLang wants an NVFP4
// block scale of exactly [N, K/16] F8_E4M3, an INT8 scale of () or [N, 1]).
// The checks are a table keyed by format name: this is SGLang's own list.
#include <array>
#include <functional>

#include <fmt/format.h>

#include "plan/sglang_rules.hpp"

namespace mixq::sglang {
namespace {

using nlohmann::json;

const TensorView* get(const LayerPlan& layer, std::string_view role) { return layer.layer.find(role); }

bool shape_is(const TensorView* t, const Shape& shape) { return t && t->shape == shape; }

std::string missing(const LayerPlan& layer, std::initializer_list<std::string_view> roles) {
  std::vector<std::string> names;
  for (std::string_view role : roles)
    if (!get(layer, role)) names.push_back(fmt::format("{}.{}", layer.prefix(), role));
  if (names.empty()) return {};
  return fmt::format("Comfy layer '{}' is missing checkpoint tensors: {}", layer.prefix(), py_list(names));
}

// A top-level integer parameter, or `fallback` when absent. Sets `bad` when present but not an integer.
int64_t top_int(const json& top, const char* key, int64_t fallback, bool& bad) {
  auto it = top.find(key);
  if (it == top.end()) return fallback;
  if (!it->is_number_integer()) {
    bad = true;
    return fallback;
  }
  return it->get<int64_t>();
}

std::string describe(const TensorView* t) {
  return t ? fmt::format("{} {}", dtype_name(t->dtype), shape_str(t->shape)) : std::string("absent");
}

std::string inspect_fp8(const LayerPlan& layer, const json&) { return missing(layer, {"weight", "weight_scale"}); }

std::string inspect_int8(const LayerPlan& layer, const json&) {
  if (std::string m = missing(layer, {"weight", "weight_scale"}); !m.empty()) return m;
  const TensorView* w = get(layer, "weight");
  const TensorView* s = get(layer, "weight_scale");
  if (w->dtype != DType::I8 || s->dtype != DType::F32 || w->rank() != 2)
    return fmt::format("Comfy INT8 layer '{}' needs I8 weights and F32 scales (weight {}, weight_scale {})",
                       layer.prefix(), describe(w), describe(s));
  if (s->rank() == 0 || shape_is(s, {w->shape[0], 1})) return {};
  return fmt::format(
      "Comfy INT8 layer '{}' has incompatible weight/scale shapes: weight {}, weight_scale {} (expected () "
      "or [{}, 1])",
      layer.prefix(), shape_str(w->shape), shape_str(s->shape), w->shape[0]);
}

std::string inspect_w4a4(const LayerPlan& layer, const json& top) {
  if (std::string m = missing(layer, {"weight", "weight_scale"}); !m.empty()) return m;
  const TensorView* w = get(layer, "weight");
  const TensorView* s = get(layer, "weight_scale");
  if (w->dtype != DType::I8 || s->dtype != DType::F32 || w->rank() != 2 || !shape_is(s, {w->shape[0]}))
    return fmt::format("Comfy W4A4 layer '{}' needs an I8 [N, K/2] weight and an F32 [N] scale (weight {}, "
                       "weight_scale {})",
                       layer.prefix(), describe(w), describe(s));
  bool bad = false;
  const int64_t group = top_int(top, "convrot_groupsize", 256, bad);
  if (bad || (group != 16 && group != 64 && group != 256))
    return fmt::format("Comfy W4A4 layer '{}' has convrot_groupsize {}, expected one of (16, 64, 256)",
                       layer.prefix(), top.value("convrot_groupsize", json(256)).dump());
  const int64_t k = 2 * w->shape[1];
  if (k % 64 != 0 || k % group != 0)
    return fmt::format("Comfy W4A4 layer '{}': K = {} is not divisible by 64 and by convrot_groupsize {}",
                       layer.prefix(), k, group);
  return {};
}

std::string inspect_w4a8(const LayerPlan& layer, const json& top) {
  if (std::string m = missing(layer, {"weight", "weight_s_rel", "weight_s_channel"}); !m.empty()) return m;
  bool bad = false;
  const int64_t gs = top_int(top, "group_size", 16, bad);
  if (bad || gs < 4)
    return fmt::format("Comfy W4A8 layer '{}' has group_size {}, expected an integer >= 4", layer.prefix(),
                       top.value("group_size", json(16)).dump());
  const TensorView* w = get(layer, "weight");
  const TensorView* rel = get(layer, "weight_s_rel");
  const TensorView* channel = get(layer, "weight_s_channel");
  if (w->dtype != DType::I8 || rel->dtype != DType::F8_E4M3 || channel->dtype != DType::F32 || w->rank() != 2)
    return fmt::format(
        "Comfy W4A8 layer '{}' needs an I8 weight, F8_E4M3 weight_s_rel and F32 weight_s_channel (weight {}, "
        "weight_s_rel {}, weight_s_channel {})",
        layer.prefix(), describe(w), describe(rel), describe(channel));
  const int64_t n = w->shape[0], k = 2 * w->shape[1];
  if (k % gs != 0 || !shape_is(rel, {n, k / gs}) || !shape_is(channel, {n}))
    return fmt::format("Comfy W4A8 layer '{}' has incompatible shapes: weight {}, weight_s_rel {} (expected "
                       "[{}, {}/{}]), weight_s_channel {} (expected [{}])",
                       layer.prefix(), shape_str(w->shape), shape_str(rel->shape), n, k, gs,
                       shape_str(channel->shape), n);
  const TensorView* codebook = get(layer, "weight_codebook");
  if (codebook && (codebook->dtype != DType::F32 || !shape_is(codebook, {16})))
    return fmt::format("Comfy W4A8 layer '{}': weight_codebook must be F32 [16], found {}", layer.prefix(),
                       describe(codebook));
  const TensorView* correction = get(layer, "weight_correction");
  if (correction && (correction->dtype != DType::F32 || !shape_is(correction, {k / gs, n})))
    return fmt::format("Comfy W4A8 layer '{}': weight_correction must be F32 [{}, {}], found {}",
                       layer.prefix(), k / gs, n, describe(correction));
  return {};
}

std::string inspect_nvfp4(const LayerPlan& layer, const json&) {
  if (std::string m = missing(layer, {"weight", "weight_scale", "weight_scale_2"}); !m.empty()) return m;
  const TensorView* w = get(layer, "weight");
  const TensorView* s = get(layer, "weight_scale");
  const TensorView* s2 = get(layer, "weight_scale_2");
  if (w->dtype != DType::U8 || s->dtype != DType::F8_E4M3 || w->rank() != 2)
    return fmt::format("Comfy NVFP4 layer '{}' needs a U8 weight and an F8_E4M3 weight_scale (weight {}, "
                       "weight_scale {})",
                       layer.prefix(), describe(w), describe(s));
  if (s2->dtype != DType::F32 || !(s2->rank() == 0 || shape_is(s2, {1})))
    return fmt::format("Comfy NVFP4 layer '{}': weight_scale_2 must be F32 () or (1,), found {}",
                       layer.prefix(), describe(s2));
  const int64_t n = w->shape[0], k = 2 * w->shape[1];
  if (k % 16 != 0 || !shape_is(s, {n, k / 16}))
    return fmt::format("Comfy NVFP4 layer '{}': weight_scale must be exactly [{}, {}] for weight {}, found {}",
                       layer.prefix(), n, k / 16, shape_str(w->shape), shape_str(s->shape));
  const TensorView* pre = get(layer, "pre_quant_scale");
  if (pre && (!(pre->dtype == DType::BF16 || pre->dtype == DType::F16 || pre->dtype == DType::F32) ||
              !shape_is(pre, {k})))
    return fmt::format("Comfy NVFP4 layer '{}': pre_quant_scale must be BF16/F16/F32 [{}], found {}",
                       layer.prefix(), k, describe(pre));
  return {};
}

std::string inspect_mxfp8(const LayerPlan& layer, const json&) {
  if (std::string m = missing(layer, {"weight", "weight_scale"}); !m.empty()) return m;
  const TensorView* w = get(layer, "weight");
  const TensorView* s = get(layer, "weight_scale");
  if (w->dtype != DType::F8_E4M3 || w->rank() != 2 || w->shape[1] % 32 != 0)
    return fmt::format("Comfy MXFP8 layer '{}' needs a 2-D F8_E4M3 weight with K % 32 == 0, found {}",
                       layer.prefix(), describe(w));
  if ((s->dtype != DType::U8 && s->dtype != DType::F8_E8M0) || !shape_is(s, {w->shape[0], w->shape[1] / 32}))
    return fmt::format("Comfy MXFP8 layer '{}': weight_scale must be exactly U8 [{}, {}], found {}",
                       layer.prefix(), w->shape[0], w->shape[1] / 32, describe(s));
  return {};
}

struct Inspector {
  std::string_view format;
  std::string (*check)(const LayerPlan&, const json&);
};

constexpr std::array<Inspector, 6> kInspectors{{
    {"float8_e4m3fn", inspect_fp8},
    {"int8_tensorwise", inspect_int8},
    {"convrot_w4a4", inspect_w4a4},
    {"asym_w4a8_int8", inspect_w4a8},
    {"nvfp4", inspect_nvfp4},
    {"mxfp8", inspect_mxfp8},
}};

}  // namespace

std::string inspect(const LayerPlan& layer, const json& top) {
  const std::string format = layer.format_name();
  for (const Inspector& inspector : kInspectors)
    if (inspector.format == format) return inspector.check(layer, top);
  return {};
}

std::string inspect_all(PlanState& state) {
  if (std::string problem = global_mxfp8_problem(state); !problem.empty()) return problem;
  // SGLang does not convert legacy scaled_fp8 files: their FP8 weights have no marker for it.
  std::vector<std::string> legacy;
  for (const auto& [prefix, marker] : state.markers.markers)
    if (marker.source.rfind("legacy", 0) == 0) legacy.push_back(prefix);
  if (!legacy.empty()) {
    std::vector<std::string> first(legacy.begin(), legacy.begin() + std::min<size_t>(legacy.size(), 5));
    return raises(kRuntime, "ValueError",
                  fmt::format("Quantized weights are missing comfy_quant metadata: {} (a legacy scaled_fp8 "
                              "file, which only ComfyUI converts)",
                              py_list(first)));
  }
  for (LayerPlan& layer : state.layers) {
    const Marker* marker = state.marker(layer);
    if (!marker) continue;
    std::string problem = inspect(layer, top_level(state.markers, *marker));
    if (problem.empty()) continue;
    layer.reason = raises(kRuntime, "ValueError", problem);
    return layer.reason;
  }
  return {};
}

}  // namespace mixq::sglang
