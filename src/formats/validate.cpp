// validate_layer: the checks every format shares, driven by its record's
// companion list (presence, dtype, byte size, bias), then the record's own
// shape rules, which return the logical [out, in].
#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "mixq/error.hpp"
#include "mixq/format.hpp"
#include "mixq/layer.hpp"

namespace mixq {
namespace {

std::string dtype_list(const std::vector<DType>& dtypes) {
  std::string s;
  for (size_t i = 0; i < dtypes.size(); ++i) {
    if (i) s += i + 1 == dtypes.size() ? " or " : ", ";
    s += dtype_name(dtypes[i]);
  }
  return s;
}

// The bytes behind a view must match its dtype and shape (views built by
// hand, not only by the reader, reach the formats).
void check_bytes(const Layer& layer, const TensorView& t) {
  for (int64_t d : t.shape)
    if (d < 0) fail("layer '{}': tensor '{}' has a negative dimension in {}", layer.prefix, t.name, shape_str(t.shape));
  uint64_t count = 1;
  for (int64_t d : t.shape) {
    if (d != 0 && count > t.data.size() / static_cast<uint64_t>(d)) {
      count = UINT64_MAX;
      break;
    }
    count *= static_cast<uint64_t>(d);
  }
  if (count == UINT64_MAX || count * dtype_size(t.dtype) != t.data.size())
    fail("layer '{}': tensor '{}' ({} {}) holds {} bytes, which does not match its shape", layer.prefix, t.name,
         dtype_name(t.dtype), shape_str(t.shape), t.data.size());
}

}  // namespace

void validate_layer(Layer& layer) {
  if (!layer.format)
    fail("layer '{}': unknown quantization format '{}'{}", layer.prefix, layer.declared_format,
         layer.marker_source.empty() ? "" : " (declared in " + layer.marker_source + ")");
  const FormatTraits& format = *layer.format;
  layer.warnings.clear();

  std::vector<std::string> missing;
  for (const CompanionSpec& spec : format.tensors)
    if (spec.required && !layer.find(spec.role)) missing.push_back(layer.prefix + "." + std::string(spec.role));
  if (!missing.empty())
    fail("layer '{}' ({}) is missing checkpoint tensors: [{}]", layer.prefix, format.name,
         fmt::join(missing, ", "));

  for (const auto& [role, view] : layer.tensors) check_bytes(layer, view);
  for (const CompanionSpec& spec : format.tensors) {
    const TensorView* t = layer.find(spec.role);
    if (!t) continue;
    if (std::find(spec.dtypes.begin(), spec.dtypes.end(), t->dtype) == spec.dtypes.end())
      fail("layer '{}' ({}): tensor '{}' must be {}, found {}", layer.prefix, format.name, t->name,
           dtype_list(spec.dtypes), dtype_name(t->dtype));
  }
  const TensorView* bias = layer.find("bias");
  if (bias && (!is_float(bias->dtype) || bias->rank() != 1))
    fail("layer '{}': bias '{}' must be a 1-D F32, F16, BF16 or F64 tensor, found {} {}", layer.prefix, bias->name,
         dtype_name(bias->dtype), shape_str(bias->shape));

  if (!format.validate) fail("layer '{}': format '{}' has no validator", layer.prefix, format.name);
  const LogicalShape shape = format.validate(layer);
  layer.out_features = shape.out_features;
  layer.in_features = shape.in_features;
  layer.k_pad_unit = shape.k_pad_unit;
  if (bias && bias->shape[0] != shape.out_features)
    fail("layer '{}': bias '{}' has {} values, expected out_features = {}", layer.prefix, bias->name,
         bias->shape[0], shape.out_features);
}

}  // namespace mixq
