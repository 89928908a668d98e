// Linear::create: the single entry from a planned layer to its runtime kernel.
// The runtime table (runtime_table.hpp) decides how; this only refuses layers
// that did not plan.
#include "mixq/linear.hpp"

#include <algorithm>
#include <utility>
#include <vector>

#include "io/mapped_file.hpp"
#include "mixq/error.hpp"
#include "mixq/format.hpp"
#include "mixq/layer.hpp"
#include "linear/runtime_table.hpp"

namespace mixq {
namespace {

// A factory copies (packs) the layer's tensors into buffers the Linear owns,
// so once it is built the file pages under them can go
// (LinearOptions::release_file_pages), unless the Linear reads the file in
// place (Linear::reads_file_in_place: then its pages are the weight). Ranges that touch are merged first, so
// that a page shared only by two tensors of this layer goes too; pages shared
// with anything else stay (MappedFile::release_pages).
void release_consumed_pages(const Layer& layer) {
  std::vector<std::pair<const std::byte*, const std::byte*>> ranges;
  for (const auto& [role, tensor] : layer.tensors)
    if (!tensor.data.empty()) ranges.emplace_back(tensor.data.data(), tensor.data.data() + tensor.data.size());
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 0; i < ranges.size();) {
    auto [begin, end] = ranges[i];
    for (++i; i < ranges.size() && ranges[i].first <= end; ++i) end = std::max(end, ranges[i].second);
    MappedFile::release_pages({begin, static_cast<size_t>(end - begin)});
  }
}

}  // namespace

std::unique_ptr<Linear> Linear::create(const Layer& layer, const LinearOptions& options) {
  if (!layer.problem.empty())
    fail("layer '{}': cannot run a layer that failed validation: {}", layer.prefix, layer.problem);
  if (layer.format == nullptr)
    fail("layer '{}': unknown format '{}'", layer.prefix, layer.declared_format);
  const linear::FormatRuntime* runtime = linear::find_runtime(layer.format->name);
  if (runtime == nullptr)
    fail("layer '{}': format '{}' has no linear kernel", layer.prefix, layer.format->name);
  if (layer.out_features <= 0 || layer.in_features <= 0)
    fail("layer '{}': logical shape [{}, {}] is empty or not validated", layer.prefix,
         layer.out_features, layer.in_features);
  std::unique_ptr<Linear> linear = runtime->make(layer, options);
  if (!linear) fail("layer '{}': format '{}' built no linear", layer.prefix, layer.format->name);
  if (options.release_file_pages && !linear->reads_file_in_place()) release_consumed_pages(layer);
  return linear;
}

}  // namespace mixq
