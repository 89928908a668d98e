#include "linear/synthetic_layer.hpp"

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>

#include "mixq/error.hpp"
#include "mixq/marker.hpp"
#include "mixq/safetensors_writer.hpp"

namespace mixq::linear {

std::unique_ptr<SyntheticLayer> make_synthetic_layer(const FormatTraits& format,
                                                     const nlohmann::json& params,
                                                     std::vector<float> weight, int64_t n,
                                                     int64_t k, std::vector<float> bias) {
  if (!format.quantize) fail("format '{}' has no quantizer", format.name);
  if (static_cast<int64_t>(weight.size()) != n * k)
    fail("synthetic layer: weight has {} values, expected {}x{}", weight.size(), n, k);
  auto out = std::make_unique<SyntheticLayer>();
  out->weight = std::move(weight);
  out->bias = std::move(bias);
  const nlohmann::json full = apply_defaults(format, params);
  QuantizedLayer q = format.quantize(out->weight.data(), n, k, full);
  out->tensors = std::move(q.tensors);
  if (!out->bias.empty()) {
    if (static_cast<int64_t>(out->bias.size()) != n)
      fail("synthetic layer: bias has {} values, expected {}", out->bias.size(), n);
    OwnedTensor b{"bias", DType::F32, {n}, std::vector<std::byte>(out->bias.size() * 4)};
    std::memcpy(b.data.data(), out->bias.data(), b.data.size());
    out->tensors.push_back(std::move(b));
  }
  Layer& layer = out->layer;
  layer.prefix = "synthetic";
  layer.format = &format;
  layer.declared_format = std::string(format.name);
  nlohmann::json marker_params = q.marker.is_object() ? q.marker : full;
  layer.params = apply_defaults(format, marker_params);
  layer.params.erase("format");
  for (const OwnedTensor& t : out->tensors) {
    std::string role = t.name;
    if (role.rfind("synthetic.", 0) == 0) role = role.substr(10);
    TensorView view = t.view();
    view.name = "synthetic." + role;
    layer.tensors[role] = view;
  }
  validate_layer(layer);
  return out;
}

std::unique_ptr<SyntheticLayer> make_random_layer(const FormatTraits& format,
                                                  const nlohmann::json& params, int64_t n,
                                                  int64_t k, uint64_t seed, bool with_bias) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.05f);
  std::vector<float> w(static_cast<size_t>(n * k));
  for (float& v : w) v = normal(rng);
  std::vector<float> b;
  if (with_bias) {
    b.resize(static_cast<size_t>(n));
    for (float& v : b) v = normal(rng);
  }
  return make_synthetic_layer(format, params, std::move(w), n, k, std::move(b));
}

std::unique_ptr<MappedSyntheticLayer> map_synthetic_layer(const SyntheticLayer& synthetic) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("mixq-synthetic-" + std::to_string(::getpid()) + ".safetensors"))
          .string();
  const Layer& layer = synthetic.layer;
  // A marker for every format that has one (not "unquantized": a plain weight).
  const bool marked = layer.format->from_marker;
  nlohmann::json marker = layer.params;
  marker["format"] = layer.format->name;
  const std::string json = marker.dump();
  {
    SafetensorsWriter writer(path);
    for (const auto& [role, t] : layer.tensors) writer.declare(t.name, t.dtype, t.shape);
    if (marked) writer.declare(layer.prefix + ".comfy_quant", DType::U8, {static_cast<int64_t>(json.size())});
    for (const auto& [role, t] : layer.tensors) writer.write(t.data);
    if (marked) writer.write(std::as_bytes(std::span(json.data(), json.size())));
    writer.commit();
  }
  auto out = std::unique_ptr<MappedSyntheticLayer>(
      new MappedSyntheticLayer{Checkpoint::open(path), LayerSet{}, nullptr});
  std::filesystem::remove(path);  // the mapping stays
  out->set = group_layers(out->checkpoint, collect_markers(out->checkpoint));
  for (const Layer& l : out->set.layers)
    if (l.prefix == layer.prefix) out->layer = &l;
  if (!out->layer) fail("{}: the written layer '{}' was not found again", path, layer.prefix);
  if (!out->layer->problem.empty()) fail("{}: {}", path, out->layer->problem);
  return out;
}

}  // namespace mixq::linear
