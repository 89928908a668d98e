// Stage 3 of `mixq quantize`: which output tensor goes into which file (a
// layer never spans two shards), and the header markers each file carries.
#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "io/strict_json.hpp"
#include "mixq/marker.hpp"
#include "quantize/stages.hpp"

namespace mixq::quantize {

std::vector<Shard> assign_shards(const std::vector<OutTensor>& out, uint64_t shard_size,
                                 bool folder) {
  // Units in order of their first tensor; a unit never spans two shards.
  std::vector<std::string> order;
  std::map<std::string, std::vector<size_t>> members;
  std::map<std::string, uint64_t> unit_bytes;
  for (size_t i = 0; i < out.size(); ++i) {
    auto [it, fresh] = members.try_emplace(out[i].unit);
    if (fresh) order.push_back(out[i].unit);
    it->second.push_back(i);
    unit_bytes[out[i].unit] += out[i].bytes;
  }
  std::vector<Shard> shards(1);
  uint64_t current = 0;
  for (const std::string& unit : order) {
    if (shard_size > 0 && current > 0 && current + unit_bytes[unit] > shard_size) {
      shards.emplace_back();
      current = 0;
    }
    Shard& shard = shards.back();
    shard.tensors.insert(shard.tensors.end(), members[unit].begin(), members[unit].end());
    shard.units.insert(unit);
    current += unit_bytes[unit];
  }
  for (Shard& shard : shards) std::sort(shard.tensors.begin(), shard.tensors.end());
  if (shards.size() == 1) {
    shards[0].file_name = folder ? "model.safetensors" : "";
  } else {
    for (size_t i = 0; i < shards.size(); ++i)
      shards[i].file_name =
          fmt::format("model-{:05d}-of-{:05d}.safetensors", i + 1, shards.size());
  }
  return shards;
}

std::map<std::string, std::string> shard_metadata(
    const std::map<std::string, std::string>& base, const nlohmann::json& header_markers,
    const std::map<std::string, std::string>& marker_unit, const Shard& shard, bool first) {
  std::map<std::string, std::string> meta = base;
  nlohmann::json layers = nlohmann::json::object();
  for (const auto& [prefix, marker] : header_markers.items()) {
    auto unit = marker_unit.find(prefix);
    bool here = unit != marker_unit.end() ? shard.units.count(unit->second) > 0 : first;
    if (here) layers[prefix] = marker;
  }
  if (!layers.empty()) {
    meta[std::string(kHeaderMarkersKey)] = header_markers_json(layers);
  }
  return meta;
}

// Header markers already present in the source files.
nlohmann::json source_header_markers(const Checkpoint& source) {
  nlohmann::json layers = nlohmann::json::object();
  for (const FileInfo& file : source.files()) {
    auto it = file.metadata.find(std::string(kHeaderMarkersKey));
    if (it == file.metadata.end()) continue;
    // collect_markers validated it (strict parser, size limit) already.
    auto json = parse_strict_json(it->second, fmt::format("Invalid _quantization_metadata in {}", file.path));
    if (json.is_object() && json.contains(std::string(kHeaderLayersKey)) && json[std::string(kHeaderLayersKey)].is_object())
      for (const auto& [prefix, marker] : json[std::string(kHeaderLayersKey)].items()) layers[prefix] = marker;
  }
  return layers;
}

}  // namespace mixq::quantize
