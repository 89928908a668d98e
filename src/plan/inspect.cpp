// Builds the `mixq inspect --json` object (docs/CLI.md).
#include "mixq/inspect.hpp"

#include "mixq/escape.hpp"
#include "mixq/format.hpp"

namespace mixq {
namespace {

using nlohmann::json;

json tensor_json(const TensorView& t) {
  return {{"dtype", dtype_name(t.dtype)}, {"shape", t.shape}, {"bytes", t.data.size()}};
}

// Format name for JSON and the per-format summary: null for unquantized layers.
json format_json(const Layer& layer) {
  if (!layer.format) return layer.declared_format;
  if (!layer.format->from_marker) return nullptr;
  return std::string(layer.format->name);
}

}  // namespace

json inspect_report(const Checkpoint& checkpoint, bool list_other_tensors) {
  MarkerSet markers = collect_markers(checkpoint);
  LayerSet layers = group_layers(checkpoint, markers);
  return inspect_report(checkpoint, markers, layers, list_other_tensors);
}

json inspect_report(const Checkpoint& checkpoint, const MarkerSet& markers, const LayerSet& set,
                    bool list_other_tensors) {
  json report = json::object();
  json files = json::array();
  for (const FileInfo& f : checkpoint.files())
    files.push_back({{"path", f.path},
                     {"bytes", f.bytes},
                     {"header_bytes", f.header_bytes},
                     {"tensors", f.tensors},
                     {"trailing_bytes", f.trailing_bytes}});
  report["files"] = files;

  json warnings = json::array();
  for (const auto& w : checkpoint.warnings()) warnings.push_back(w);
  for (const auto& w : markers.warnings) warnings.push_back(w);
  for (const auto& w : set.warnings) warnings.push_back(w);

  json layers = json::array();
  json formats = json::object();
  for (const Layer& layer : set.layers) {
    json tensors = json::object();
    for (const auto& [role, view] : layer.tensors) tensors[role] = tensor_json(view);
    json entry = {{"prefix", layer.prefix},
                  {"format", format_json(layer)},
                  {"params", layer.params},
                  {"out_features", layer.out_features},
                  {"in_features", layer.in_features},
                  {"tensors", tensors},
                  {"bytes", layer.bytes()}};
    if (!layer.problem.empty()) {
      entry["problem"] = layer.problem;
      warnings.push_back(layer.problem);
    }
    for (const auto& w : layer.warnings) warnings.push_back(w);  // formats name the layer themselves
    layers.push_back(std::move(entry));

    const std::string key = layer.format ? std::string(layer.format->name) : layer.declared_format;
    json& total = formats[key];
    if (total.is_null()) total = {{"layers", 0}, {"bytes", 0}, {"weights", 0}};
    total["layers"] = total["layers"].get<int64_t>() + 1;
    total["bytes"] = total["bytes"].get<uint64_t>() + layer.bytes();
    total["weights"] = total["weights"].get<int64_t>() + layer.out_features * layer.in_features;
  }
  for (auto& [name, total] : formats.items()) {
    const auto weights = total["weights"].get<int64_t>();
    total["bits_per_weight"] =
        weights > 0 ? 8.0 * static_cast<double>(total["bytes"].get<uint64_t>()) / weights : 0.0;
  }
  report["layers"] = layers;

  json others = json::array();
  if (list_other_tensors) {
    for (const TensorView* t : set.other_tensors)
      others.push_back({{"name", t->name}, {"dtype", dtype_name(t->dtype)}, {"shape", t->shape}});
    report["other_tensors"] = others;
  }
  report["other_tensor_count"] = set.other_tensors.size();
  report["formats"] = formats;
  report["warnings"] = warnings;
  make_json_utf8(report);  // paths come from the command line, not only from JSON
  return report;
}

}  // namespace mixq
