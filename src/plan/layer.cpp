// Groups a checkpoint's tensors into linear layers by prefix and binds each to
// its format record. Which tensors a layer claims comes from the format table
// (CompanionSpec roles and aliases), never from a list kept here.
#include "mixq/layer.hpp"

#include <algorithm>
#include <set>

#include "mixq/error.hpp"
#include "mixq/format.hpp"

namespace mixq {
namespace {

constexpr std::string_view kWeight = ".weight";

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// Logical tensor names -> views, after legacy renames and without consumed
// tensors (marker tensors, sentinels).
std::map<std::string, TensorView> logical_tensors(const Checkpoint& checkpoint,
                                                  const MarkerSet& markers) {
  std::map<std::string, std::string> stored_to_logical;
  for (const auto& [logical, stored] : markers.renamed) stored_to_logical[stored] = logical;
  std::map<std::string, TensorView> pool;
  for (const TensorView& tensor : checkpoint.tensors()) {
    if (markers.consumed.count(tensor.name)) continue;
    auto renamed = stored_to_logical.find(tensor.name);
    const std::string& name = renamed == stored_to_logical.end() ? tensor.name : renamed->second;
    if (!pool.emplace(name, tensor).second)
      fail("tensor '{}' (renamed from legacy '{}') collides with an existing tensor of that name", name,
           tensor.name);
  }
  return pool;
}

// Every role a layer of `format` may claim, with the spelling to look up.
struct RoleName {
  std::string role;      // canonical
  std::string spelling;  // suffix as stored
};

std::vector<RoleName> claimable_roles(const FormatTraits* format) {
  std::vector<RoleName> roles{{"bias", "bias"}};
  auto add_format = [&](const FormatTraits& f) {
    for (const CompanionSpec& c : f.tensors) {
      roles.push_back({std::string(c.role), std::string(c.role)});
      for (std::string_view alias : c.aliases) roles.push_back({std::string(c.role), std::string(alias)});
    }
  };
  if (format) {
    add_format(*format);
  } else {  // unknown format: claim anything any format would.
    for (const FormatTraits* f : all_formats()) add_format(*f);
  }
  return roles;
}

Layer bind_layer(const std::string& prefix, const Marker* marker,
                 std::map<std::string, TensorView>& pool) {
  Layer layer;
  layer.prefix = prefix;
  if (marker) {
    layer.declared_format = marker->format;
    layer.marker_source = marker->source;
    layer.format = find_format(marker->format);
    if (layer.format)
      layer.params = apply_defaults(*layer.format, marker->params);
    else
      layer.params = marker->params;
  } else {
    layer.format = &unquantized_format();
    layer.declared_format = std::string(layer.format->name);
  }
  for (const RoleName& r : claimable_roles(layer.format)) {
    auto it = pool.find(prefix + "." + r.spelling);
    if (it == pool.end()) continue;
    if (layer.tensors.count(r.role))
      fail("layer '{}': tensor '{}' and another spelling of role '{}' are both present", prefix,
           it->first, r.role);
    layer.tensors.emplace(r.role, it->second);
    pool.erase(it);
  }
  return layer;
}

// Fills the logical shape from the format; failures become Layer::problem.
void validate_in_place(Layer& layer) {
  if (const TensorView* w = layer.find("weight"); w && w->rank() == 2) {
    layer.out_features = w->shape[0];
    layer.in_features = w->shape[1];
  }
  if (!layer.format) {
    layer.problem = fmt::format("layer '{}': unknown quantization format '{}' (from {})",
                                layer.prefix, layer.declared_format, layer.marker_source);
    return;
  }
  try {
    validate_layer(layer);
  } catch (const Error& e) {
    layer.problem = e.what();
  }
}

}  // namespace

const TensorView* Layer::find(std::string_view role) const {
  auto it = tensors.find(std::string(role));
  return it == tensors.end() ? nullptr : &it->second;
}

const TensorView& Layer::tensor(std::string_view role) const {
  if (const TensorView* t = find(role)) return *t;
  fail("layer '{}' is missing checkpoint tensor '{}.{}'", prefix, prefix, role);
}

bool Layer::param_bool(std::string_view key) const {
  auto it = params.find(std::string(key));
  if (it == params.end() || it->is_null()) return false;
  if (!it->is_boolean())
    fail("layer '{}': marker parameter \"{}\" must be a boolean, found {}", prefix, key, it->dump());
  return it->get<bool>();
}

int64_t Layer::param_int(std::string_view key) const {
  auto it = params.find(std::string(key));
  if (it == params.end() || !it->is_number_integer())
    fail("layer '{}': marker parameter \"{}\" must be an integer, found {}", prefix, key,
         it == params.end() ? std::string("nothing") : it->dump());
  return it->get<int64_t>();
}

std::string Layer::param_string(std::string_view key) const {
  auto it = params.find(std::string(key));
  if (it == params.end() || !it->is_string())
    fail("layer '{}': marker parameter \"{}\" must be a string, found {}", prefix, key,
         it == params.end() ? std::string("nothing") : it->dump());
  return it->get<std::string>();
}

uint64_t Layer::bytes() const {
  uint64_t total = 0;
  for (const auto& [role, view] : tensors) total += view.data.size();
  return total;
}

LayerSet group_layers(const Checkpoint& checkpoint, const MarkerSet& markers) {
  std::map<std::string, TensorView> pool = logical_tensors(checkpoint, markers);

  // A layer is every marked prefix and every prefix owning a 2-D ".weight".
  std::set<std::string> prefixes;
  for (const auto& [prefix, marker] : markers.markers) prefixes.insert(prefix);
  for (const auto& [name, view] : pool)
    if (ends_with(name, kWeight) && view.rank() == 2)
      prefixes.insert(name.substr(0, name.size() - kWeight.size()));

  LayerSet set;
  // Marked layers first, so their companions are claimed before an unmarked
  // neighbour could take a shared-looking name.
  for (const auto& [prefix, marker] : markers.markers) set.layers.push_back(bind_layer(prefix, &marker, pool));
  for (const std::string& prefix : prefixes)
    if (!markers.markers.count(prefix)) set.layers.push_back(bind_layer(prefix, nullptr, pool));
  std::sort(set.layers.begin(), set.layers.end(),
            [](const Layer& a, const Layer& b) { return a.prefix < b.prefix; });

  for (Layer& layer : set.layers) {
    validate_in_place(layer);
    const TensorView* weight = layer.find("weight");
    if (layer.marker_source.empty() && weight && is_quantized(weight->dtype))
      set.warnings.push_back(fmt::format(
          "layer '{}': weight stored as {} without a comfy_quant marker (Quantized weights are missing "
          "comfy_quant metadata)",
          layer.prefix, dtype_name(weight->dtype)));
  }
  for (auto& [name, view] : pool) set.other_tensors.push_back(view);
  return set;
}

}  // namespace mixq
