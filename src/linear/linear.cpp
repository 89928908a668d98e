// Linear::create: the single entry from a planned layer to its runtime kernel.
// The runtime table (runtime_table.hpp) decides how; this only refuses layers
// that did not plan.
#include "mixq/linear.hpp"

#include "mixq/error.hpp"
#include "mixq/format.hpp"
#include "mixq/layer.hpp"
#include "linear/runtime_table.hpp"

namespace mixq {

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
  return linear;
}

}  // namespace mixq
