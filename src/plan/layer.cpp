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

// The tensors not yet claimed by a layer, by logical name (after legacy
// renames, without consumed tensors: marker tensors, sentinels). A sorted
// vector of pointers into the checkpoint: 24 bytes a tensor, where a map of
// copies cost ~250 (a header may list millions of tensors).
class Pool {
 public:
  Pool(const Checkpoint& checkpoint, const MarkerSet& markers) {
    std::map<std::string_view, std::string_view> stored_to_logical;
    for (const auto& [logical, stored] : markers.renamed) stored_to_logical[stored] = logical;
    entries_.reserve(checkpoint.tensors().size());
    for (const TensorView& tensor : checkpoint.tensors()) {
      if (markers.consumed.count(tensor.name)) continue;
      auto renamed = stored_to_logical.find(tensor.name);
      entries_.push_back({renamed == stored_to_logical.end() ? std::string_view(tensor.name) : renamed->second,
                          &tensor});
    }
    std::sort(entries_.begin(), entries_.end(), [](const Entry& a, const Entry& b) { return a.name < b.name; });
    for (size_t i = 1; i < entries_.size(); ++i)
      if (entries_[i].name == entries_[i - 1].name)
        fail("tensor '{}' (renamed from legacy '{}') collides with an existing tensor of that name",
             entries_[i].name, entries_[i].view->name == entries_[i].name ? entries_[i - 1].view->name
                                                                            : entries_[i].view->name);
  }
  // The unclaimed tensor of that logical name, or null.
  const TensorView* find(std::string_view name) const {
    auto it = std::lower_bound(entries_.begin(), entries_.end(), name,
                               [](const Entry& e, std::string_view n) { return e.name < n; });
    return it != entries_.end() && it->name == name && it->view ? it->view : nullptr;
  }
  void take(std::string_view name) {
    auto it = std::lower_bound(entries_.begin(), entries_.end(), name,
                               [](const Entry& e, std::string_view n) { return e.name < n; });
    if (it != entries_.end() && it->name == name) it->view = nullptr;
  }
  // Prefixes owning a 2-D ".weight" (unclaimed).
  template <class F>
  void each(F&& f) const {
    for (const Entry& e : entries_)
      if (e.view) f(e.name, *e.view);
  }

 private:
  struct Entry {
    std::string_view name;
    const TensorView* view;  // null once a layer claimed it
  };
  std::vector<Entry> entries_;
};

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

Layer bind_layer(const std::string& prefix, const Marker* marker, Pool& pool) {
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
    const std::string name = prefix + "." + r.spelling;
    const TensorView* view = pool.find(name);
    if (!view) continue;
    if (layer.tensors.count(r.role))
      fail("layer '{}': tensor '{}' and another spelling of role '{}' are both present", prefix, name,
           r.role);
    layer.tensors.emplace(r.role, *view);
    pool.take(name);
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
  Pool pool(checkpoint, markers);

  // A layer is every marked prefix and every prefix owning a 2-D ".weight".
  std::set<std::string> prefixes;
  for (const auto& [prefix, marker] : markers.markers) prefixes.insert(prefix);
  pool.each([&](std::string_view name, const TensorView& view) {
    if (ends_with(name, kWeight) && view.rank() == 2)
      prefixes.insert(std::string(name.substr(0, name.size() - kWeight.size())));
  });

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
  pool.each([&](std::string_view, const TensorView& view) { set.other_tensors.push_back(&view); });
  return set;
}

}  // namespace mixq
