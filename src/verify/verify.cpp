// mixq verify: per-layer checks through the format table (see mixq/verify.hpp).
#include "mixq/verify.hpp"

#include <cmath>
#include <map>

#include <fmt/format.h>

#include "mixq/checkpoint.hpp"
#include "mixq/error.hpp"
#include "mixq/escape.hpp"
#include "mixq/layer.hpp"
#include "mixq/marker.hpp"
#include "mixq/numeric.hpp"

namespace mixq {
namespace {

// Scale roles by the naming every format shares: "weight_scale",
// "weight_scale_2", "input_scale", "pre_quant_scale", "weight_s_rel",
// "weight_s_channel". Zeros, codebooks and corrections may be negative.
bool is_scale_role(const std::string& role) {
  return role.find("scale") != std::string::npos || role.rfind("weight_s_", 0) == 0;
}

// U8 scale bytes are codes (E4M3, E8M0) only the format can read.
bool decodable_scale(DType dtype) {
  return is_float(dtype) || dtype == DType::F8_E4M3 || dtype == DType::F8_E5M2 || dtype == DType::F8_E8M0;
}

// One value per tensor, one per row ([N], [N, 1]) may not be 0; block scales may.
bool zero_allowed(const TensorView& t) {
  return t.rank() >= 2 && t.shape[1] > 1;
}

LayerCheck check_scales(const Layer& layer) {
  LayerCheck result{"scales", true, ""};
  std::vector<std::string> problems;
  size_t checked = 0;
  for (const auto& [role, view] : layer.tensors) {
    if (role == "weight" || role == "bias" || !is_scale_role(role) || !decodable_scale(view.dtype))
      continue;
    ++checked;
    std::vector<float> values = to_f32(view);
    size_t nonfinite = 0, negative = 0, zero = 0;
    for (float v : values) {
      if (!std::isfinite(v)) ++nonfinite;
      else if (v < 0) ++negative;
      else if (v == 0) ++zero;
    }
    if (!zero_allowed(view) && zero > 0)
      problems.push_back(fmt::format("{} has {} zero values", role, zero));
    if (nonfinite) problems.push_back(fmt::format("{} has {} non-finite values", role, nonfinite));
    if (negative) problems.push_back(fmt::format("{} has {} negative values", role, negative));
  }
  if (!problems.empty()) {
    result.ok = false;
    for (size_t i = 0; i < problems.size(); ++i) result.detail += (i ? "; " : "") + problems[i];
  } else {
    result.detail = checked ? fmt::format("{} scale tensors finite and positive", checked)
                            : "no float scale tensors (format check covers them)";
  }
  return result;
}

// Relative Frobenius error of the dequantized weight against the float source
// over the logical [N, K]; stored padding beyond the source counts as error.
LayerCheck compare(const std::vector<float>& deq, int64_t n, int64_t k, const TensorView& src,
                   double max_error, double& rel) {
  LayerCheck result{"error", true, ""};
  if (src.rank() != 2 || src.shape[0] > n || src.shape[1] > k) {
    result.ok = false;
    result.detail = fmt::format("source weight {} does not fit the layer's [{}, {}]",
                                shape_str(src.shape), n, k);
    return result;
  }
  const int64_t sn = src.shape[0], sk = src.shape[1];
  std::vector<float> w = to_f32(src);
  double err = 0, ref = 0;
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < k; ++c) {
      double d = deq[r * k + c];
      if (r < sn && c < sk) {
        double x = w[r * sk + c];
        err += (d - x) * (d - x);
        ref += x * x;
      } else {
        err += d * d;
      }
    }
  rel = ref > 0 ? std::sqrt(err / ref) : std::sqrt(err);
  result.ok = std::isfinite(rel) && rel <= max_error;
  result.detail = fmt::format("relative error {:.4g} (limit {:.3g})", rel, max_error);
  return result;
}

// Used only for a format record without an expected error.
constexpr double kFallbackLimit = 0.5;

}  // namespace

double verify_error_limit(const FormatTraits& format, const VerifyOptions& options) {
  if (options.max_rel_error) return *options.max_rel_error;
  return format.expected_rel_error > 0 ? kVerifyErrorFactor * format.expected_rel_error : kFallbackLimit;
}

VerifyReport verify_checkpoint(const Checkpoint& checkpoint, const Checkpoint* against,
                               const VerifyOptions& options) {
  VerifyReport report;
  MarkerSet markers = collect_markers(checkpoint);
  LayerSet set = group_layers(checkpoint, markers);
  report.warnings = set.warnings;
  for (const std::string& w : checkpoint.warnings()) report.warnings.push_back(w);

  std::map<std::string, Layer> source_layers;
  if (against != nullptr) {
    LayerSet src = group_layers(*against, collect_markers(*against));
    for (Layer& layer : src.layers) source_layers.emplace(layer.prefix, std::move(layer));
  }

  for (const Layer& layer : set.layers) {
    if (layer.format == &unquantized_format()) {
      ++report.unquantized_layers;
      continue;
    }
    VerifiedLayer v;
    v.prefix = layer.prefix;
    v.format = layer.format ? std::string(layer.format->name) : layer.declared_format;
    v.params = layer.params;
    v.out_features = layer.out_features;
    v.in_features = layer.in_features;
    auto finish = [&] {
      for (const LayerCheck& c : v.checks) v.ok = v.ok && c.ok;
      if (!v.ok) ++report.failed;
      report.layers.push_back(std::move(v));
    };
    if (layer.format == nullptr || !layer.problem.empty()) {
      v.checks.push_back({"valid", false,
                          layer.problem.empty() ? "unknown format '" + layer.declared_format + "'"
                                                : layer.problem});
      finish();
      continue;
    }
    v.checks.push_back({"valid", true, fmt::format("[{}, {}]", layer.out_features, layer.in_features)});
    v.max_rel_error = verify_error_limit(*layer.format, options);

    const int64_t n = layer.out_features, k = layer.in_features;
    std::vector<float> deq;
    LayerCheck decode{"decode", true, ""};
    try {
      if (layer.format->dequantize == nullptr) fail("format has no dequantize");
      deq.resize(static_cast<size_t>(n * k));
      layer.format->dequantize(layer, Basis::original, deq.data());
      size_t nonfinite = 0;
      for (float x : deq) nonfinite += !std::isfinite(x);
      decode.ok = nonfinite == 0;
      decode.detail = nonfinite ? fmt::format("{} of {} values not finite", nonfinite, deq.size())
                                : fmt::format("{} values finite", deq.size());
    } catch (const Error& e) {
      decode.ok = false;
      decode.detail = e.what();
    }
    v.checks.push_back(decode);
    v.checks.push_back(check_scales(layer));
    if (layer.format->check != nullptr) {
      try {
        for (LayerCheck& c : layer.format->check(layer)) v.checks.push_back(std::move(c));
      } catch (const Error& e) {
        v.checks.push_back({"format_check", false, e.what()});
      }
    }
    if (against != nullptr && decode.ok) {
      auto it = source_layers.find(layer.prefix);
      const TensorView* src = it == source_layers.end() ? nullptr : it->second.find("weight");
      if (src == nullptr || !is_float(src->dtype) ||
          it->second.format != &unquantized_format()) {
        v.checks.push_back({"error", false, "the source has no float weight for this layer"});
      } else {
        double rel = 0;
        v.checks.push_back(compare(deq, n, k, *src, v.max_rel_error, rel));
        v.rel_error = rel;
      }
    }
    finish();
  }
  return report;
}

nlohmann::json verify_report_json(const VerifyReport& report) {
  nlohmann::json layers = nlohmann::json::array();
  for (const VerifiedLayer& v : report.layers) {
    nlohmann::json checks = nlohmann::json::array();
    for (const LayerCheck& c : v.checks)
      checks.push_back({{"name", c.name}, {"ok", c.ok}, {"detail", c.detail}});
    layers.push_back({{"prefix", v.prefix},
                      {"format", v.format},
                      {"params", v.params},
                      {"out_features", v.out_features},
                      {"in_features", v.in_features},
                      {"ok", v.ok},
                      {"checks", checks},
                      {"rel_error", v.rel_error ? nlohmann::json(*v.rel_error) : nlohmann::json()},
                      {"max_rel_error", v.max_rel_error > 0 ? nlohmann::json(v.max_rel_error) : nlohmann::json()}});
  }
  nlohmann::json out = {{"ok", report.ok()},
          {"layers", layers},
          {"summary",
           {{"quantized_layers", report.layers.size()},
            {"unquantized_layers", report.unquantized_layers},
            {"failed", report.failed}}},
          {"warnings", report.warnings}};
  make_json_utf8(out);  // warnings may quote paths from the command line
  return out;
}

}  // namespace mixq
