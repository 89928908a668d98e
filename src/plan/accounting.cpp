// Strict accounting (docs/DISPATCH.md §10): every marker binds to a layer with a
// weight, every quantized-dtype weight has a marker, and every tensor that
// looks like a quantization companion is claimed by a layer. Which suffixes
// "look like a companion" comes from the format table (the union of every
// record's companion roles and aliases), never from a list kept here.
#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "mixq/format.hpp"
#include "plan/profile.hpp"

namespace mixq {
namespace {

// Suffixes of companion tensors: every role and alias of every record, except
// the weight itself and the bias (which every layer may have).
std::set<std::string> companion_suffixes() {
  std::set<std::string> suffixes;
  for (const FormatTraits* format : all_formats()) {
    for (const CompanionSpec& spec : format->tensors) {
      suffixes.insert(std::string(spec.role));
      for (std::string_view alias : spec.aliases) suffixes.insert(std::string(alias));
    }
  }
  suffixes.erase("weight");
  suffixes.erase("bias");
  return suffixes;
}

std::string_view last_component(std::string_view name) {
  const size_t dot = name.rfind('.');
  return dot == std::string_view::npos ? name : name.substr(dot + 1);
}

}  // namespace

Accounting account(const MarkerSet& markers, const LayerSet& set) {
  Accounting found;
  found.any_marker = !markers.markers.empty();
  for (const Layer& layer : set.layers) {
    const TensorView* weight = layer.find("weight");
    const bool marked = !layer.marker_source.empty();
    if (marked && !weight) found.orphan_markers.push_back(layer.prefix);
    if (!marked && weight && is_quantized(weight->dtype)) found.missing_markers.push_back(layer.prefix);
  }
  const std::set<std::string> suffixes = companion_suffixes();
  constexpr std::string_view kWeight = ".weight";
  for (const TensorView* other : set.other_tensors) {
    const TensorView& tensor = *other;
    const std::string_view name = tensor.name;
    // A quantized weight that did not form a layer (not 2-D) still needs a marker.
    if (name.size() > kWeight.size() && name.substr(name.size() - kWeight.size()) == kWeight &&
        is_quantized(tensor.dtype))
      found.missing_markers.emplace_back(name.substr(0, name.size() - kWeight.size()));
    if (suffixes.count(std::string(last_component(name)))) found.unclaimed.push_back(tensor.name);
  }
  std::sort(found.orphan_markers.begin(), found.orphan_markers.end());
  std::sort(found.missing_markers.begin(), found.missing_markers.end());
  std::sort(found.unclaimed.begin(), found.unclaimed.end());
  return found;
}

std::string orphan_message(const Accounting& found) {
  if (found.orphan_markers.empty()) return {};
  return fmt::format("comfy_quant markers without a weight tensor (orphans): {}",
                     py_list(found.orphan_markers));
}

std::string unclaimed_message(const Accounting& found) {
  if (found.unclaimed.empty()) return {};
  return fmt::format(
      "quantization tensors that no layer claims (no marker, or a marker whose format does not use "
      "them): {}",
      py_list(found.unclaimed));
}

std::string raises(std::string_view runtime, std::string_view kind, std::string_view message) {
  return fmt::format("{} would raise {}: {}", runtime, kind, message);
}

std::string py_list(const std::vector<std::string>& items, size_t max) {
  std::string text = "[";
  for (size_t i = 0; i < items.size() && i < max; ++i) {
    if (i) text += ", ";
    text += "'" + items[i] + "'";
  }
  text += "]";
  if (items.size() > max) text += fmt::format(" and {} more", items.size() - max);
  return text;
}

}  // namespace mixq
