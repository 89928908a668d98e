// Stage 2 of `mixq quantize`: one layer. The recipe's format quantizes the
// float weight, the marker is completed from the rule, and the result is read
// back through the format's own validator: what we write must load.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

#include <fmt/format.h>

#include "mixq/error.hpp"
#include "mixq/numeric.hpp"
#include "quantize/staging.hpp"
#include "quantize/stages.hpp"

namespace mixq::quantize {
namespace {

// f32 view of a float weight; aligned F32 data is used in place.
const float* weight_f32(const TensorView& weight, std::vector<float>& buffer) {
  const auto* data = weight.data.data();
  if (weight.dtype == DType::F32 && reinterpret_cast<uintptr_t>(data) % alignof(float) == 0 &&
      weight.data.size() == static_cast<size_t>(weight.numel()) * sizeof(float))
    return reinterpret_cast<const float*>(data);
  buffer = to_f32(weight);
  return buffer.data();
}

// Whether a weight's magnitude lies outside [2^-64, 2^64] (zeros aside),
// NaN and infinities included: one pass on the bits (sign cleared, whose
// integer order is the floats'), branch-free so that it vectorises with the
// baseline's SSE2 (an f32 min / max reduction did not: quantize took 3-7 %
// longer). Only such weights need the checks below.
bool outside_band(const float* w, int64_t count) {
  constexpr int32_t kHigh = 0x5F800000, kLow = 0x1F800000;  // 2^64, 2^-64
  int32_t outside = 0;
  for (int64_t i = 0; i < count; ++i) {
    const int32_t a = std::bit_cast<int32_t>(w[i]) & 0x7FFFFFFF;
    outside |= static_cast<int32_t>(a > kHigh) | (static_cast<int32_t>(a < kLow) & static_cast<int32_t>(a != 0));
  }
  return outside != 0;
}

// Every format's quantizer gets finite weights: a NaN or an infinity in the
// source would otherwise come out as some finite code (the integer and 4-bit
// formats), as a non-finite scale, or as undefined behaviour in a float to
// integer conversion, the value lost without a word. Refused for every
// format alike (FP8 could store a NaN code, but a checkpoint with NaN weights
// is a broken model either way), so that `fallback=keep` keeps such a layer as
// it is.
void require_finite(const float* w, int64_t n, int64_t k) {
  for (int64_t i = 0; i < n * k; ++i)
    if (!std::isfinite(w[i]))
      fail("the weight holds {} at [{}, {}]; quantized weights must be finite",
           std::isnan(w[i]) ? "a NaN" : "an infinity", i / k, i % k);
}

bool role_known(const FormatTraits& format, const std::string& role) {
  for (const CompanionSpec& spec : format.tensors) {
    if (spec.role == role) return true;
    for (std::string_view alias : spec.aliases)
      if (alias == role) return true;
  }
  return false;
}

// The marker to write: the quantizer's, plus any parameter the rule set
// explicitly that the quantizer did not echo (e.g. full_precision_matrix_mult).
nlohmann::json complete_marker(const FormatTraits& format, const QuantizedLayer& q,
                               const RecipeRule& rule, const std::string& prefix) {
  nlohmann::json marker = q.marker.is_object() ? q.marker : nlohmann::json::object();
  if (!marker.contains("format")) marker["format"] = std::string(format.name);
  if (!marker["format"].is_string() || marker["format"].get<std::string>() != format.name)
    fail("layer '{}': quantizer of '{}' wrote a marker for '{}'", prefix, format.name,
         marker["format"].dump());
  for (const auto& [key, value] : rule.params.items())
    if (!marker.contains(key) && !format.quantize_options.contains(key)) marker[key] = value;
  return marker;
}

// What the quantizer gets: marker parameters with defaults applied, plus the
// quantizer-only options (FormatTraits::quantize_options) with theirs.
nlohmann::json quantizer_params(const FormatTraits& format, const RecipeRule& rule) {
  nlohmann::json marker_params = nlohmann::json::object();
  for (const auto& [key, value] : rule.params.items())
    if (!format.quantize_options.contains(key)) marker_params[key] = value;
  nlohmann::json params = apply_defaults(format, marker_params);
  for (const auto& [key, value] : format.quantize_options.items())
    params[key] = rule.params.contains(key) ? rule.params[key] : value;
  return params;
}

// Binds the quantizer's output like a reader would and lets the format's own
// validator judge it: what we write must load. Returns the bound layer (its
// views point into q and the source's bias).
Layer validate_output(const FormatTraits& format, const QuantizedLayer& q,
                      const nlohmann::json& marker, const Layer& source, int64_t n, int64_t k) {
  Layer check;
  check.prefix = source.prefix;
  check.format = &format;
  check.declared_format = std::string(format.name);
  nlohmann::json params = marker;
  params.erase("format");
  check.params = apply_defaults(format, params);
  check.marker_source = "quantizer output";
  for (const OwnedTensor& t : q.tensors) {
    if (!role_known(format, t.name))
      fail("layer '{}': quantizer of '{}' produced unknown tensor role '{}'", source.prefix,
           format.name, t.name);
    TensorView view = t.view();
    view.name = source.prefix + "." + t.name;
    check.tensors[t.name] = view;
  }
  if (const TensorView* bias = source.find("bias")) check.tensors["bias"] = *bias;
  validate_layer(check);
  if (check.warnings.empty() && (check.out_features != n || check.in_features != k))
    fail("layer '{}': quantized '{}' reads back as [{}, {}], source is [{}, {}]", source.prefix,
         format.name, check.out_features, check.in_features, n, k);
  return check;
}

// Finite weights can still leave a scale that is not finite: FP8 of weights
// all under ~1e-38 (1 / s overflows), a 4-bit range (hi - lo) / 15 or a
// ConvRot group sum past 3.4e38. With every non-zero magnitude within
// [2^-64, 2^64] no format's arithmetic comes near that (scales amax / 448 ..
// amax / 7, ranges of two values, ConvRot sums of 256 values times 1/16), so
// only a weight outside that band (outside_band) has its written layer
// decoded again, and refused unless every value is finite. Decoding every
// layer instead cost 13-38 % of quantize time. The decode has the written
// layer's shape (a padded one where the format pads and no bias tells the
// logical rows).
void require_finite_decode(const Layer& written, const float* w, int64_t count) {
  const int64_t n = written.out_features, k = written.in_features;
  std::vector<float> decoded(static_cast<size_t>(n * k));
  written.format->dequantize(written, Basis::original, decoded.data());
  for (int64_t i = 0; i < n * k; ++i) {
    if (std::isfinite(decoded[static_cast<size_t>(i)])) continue;
    float largest = 0.0f, smallest = INFINITY;
    for (int64_t j = 0; j < count; ++j)
      if (w[j] != 0.0f) {
        largest = std::max(largest, std::fabs(w[j]));
        smallest = std::min(smallest, std::fabs(w[j]));
      }
    fail("the quantized weight decodes to a non-finite value at [{}, {}]: the weight's magnitudes ({:g} to {:g}) "
         "are outside what the format's scales hold",
         i / k, i % k, smallest, largest);
  }
}

}  // namespace

bool is_candidate(const Layer& layer) {
  if (layer.format != &unquantized_format() || !layer.problem.empty()) return false;
  const TensorView* weight = layer.find("weight");
  return weight != nullptr && weight->rank() == 2 && is_float(weight->dtype) &&
         weight->shape[0] > 0 && weight->shape[1] > 0;
}

// Quantizes and self-validates one layer; runs on a pool thread. Releases the
// source pages of the weight when done.
LayerResult quantize_layer(const Layer& layer, const RecipeRule& rule) {
  const FormatTraits& format = *rule.format;
  const TensorView& weight = layer.tensor("weight");
  const int64_t n = weight.shape[0], k = weight.shape[1];
  LayerResult r;
  try {
    std::vector<float> buffer;
    const float* w = weight_f32(weight, buffer);
    const bool outside = outside_band(w, n * k);
    if (outside) require_finite(w, n, k);
    r.q = format.quantize(w, n, k, quantizer_params(format, rule));
    r.marker = complete_marker(format, r.q, rule, layer.prefix);
    const Layer written = validate_output(format, r.q, r.marker, layer, n, k);
    if (outside) require_finite_decode(written, w, n * k);
  } catch (const Error& e) {
    r = LayerResult{};
    r.error = e.what();
  }
  release_pages(weight.data);
  return r;
}

}  // namespace mixq::quantize
