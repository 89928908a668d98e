#pragma once
// Builds in-memory layers for the format tests: tensors owned here, the Layer
// holding views of them, bound like group_layers binds a checkpoint's layer.
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "mixq/format.hpp"
#include "mixq/layer.hpp"
#include "mixq/numeric.hpp"

namespace mixq::testing {

struct OwnedLayer {
  std::vector<OwnedTensor> tensors;  // named by role
  Layer layer;
};

// Binds `tensors` (named by role) as layer `prefix` of `format` with marker
// params `params` (defaults applied). Does not validate.
inline std::unique_ptr<OwnedLayer> bind_layer(const FormatTraits& format, std::vector<OwnedTensor> tensors,
                                              const nlohmann::json& params = nlohmann::json::object(),
                                              const std::string& prefix = "blk.proj") {
  auto out = std::make_unique<OwnedLayer>();
  out->tensors = std::move(tensors);
  out->layer.prefix = prefix;
  out->layer.format = &format;
  out->layer.declared_format = std::string(format.name);
  out->layer.marker_source = "test";
  out->layer.params = apply_defaults(format, params);
  for (const OwnedTensor& t : out->tensors) {
    TensorView v = t.view();
    v.name = prefix + "." + t.name;
    out->layer.tensors[t.name] = v;
  }
  return out;
}

inline OwnedTensor f32_tensor(const std::string& role, const Shape& shape, const std::vector<float>& values) {
  return OwnedTensor{role, DType::F32, shape, from_f32(DType::F32, values)};
}

inline OwnedTensor zero_tensor(const std::string& role, DType dtype, const Shape& shape) {
  return OwnedTensor{role, dtype, shape, std::vector<std::byte>(shape_numel(shape) * dtype_size(dtype))};
}

// Quantizes `weight` [n, k] with `params`, binds the result (plus an F32 bias
// when given) using the marker the quantizer wrote, and validates it.
inline std::unique_ptr<OwnedLayer> quantized_layer(const FormatTraits& format, const std::vector<float>& weight,
                                                   int64_t n, int64_t k, const nlohmann::json& params = {},
                                                   const std::vector<float>& bias = {}) {
  QuantizedLayer q = format.quantize(weight.data(), n, k, apply_defaults(format, params));
  if (!bias.empty()) q.tensors.push_back(f32_tensor("bias", {static_cast<int64_t>(bias.size())}, bias));
  nlohmann::json marker = q.marker.is_object() ? q.marker : nlohmann::json::object();
  marker.erase("format");
  auto out = bind_layer(format, std::move(q.tensors), marker);
  validate_layer(out->layer);
  return out;
}

inline std::vector<float> dequantized(const Layer& layer, Basis basis = Basis::original) {
  std::vector<float> out(static_cast<size_t>(layer.out_features * layer.in_features));
  layer.format->dequantize(layer, basis, out.data());
  return out;
}

inline float to_f32_first(const TensorView& t) { return to_f32(t).at(0); }

// mean |a - b| / max |b|: comfy-kitchen's "roundtrip mean error / max" measure (docs/FORMATS.md §3).
inline double mean_error_over_max(const std::vector<float>& a, const std::vector<float>& b) {
  double err = 0, mx = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    err += std::fabs(double(a[i]) - b[i]);
    mx = std::max(mx, std::fabs(double(b[i])));
  }
  return err / a.size() / mx;
}

}  // namespace mixq::testing
