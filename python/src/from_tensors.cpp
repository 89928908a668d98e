// mixq._mixq._linear_from_tensors: a Linear built from tensors in memory
// (NumPy arrays or CPU tensors) instead of a checkpoint file. It is how the
// comfy-kitchen backend (python/mixq/comfy_kitchen.py) runs weights that
// ComfyUI already holds as torch tensors. The layer is validated by its format
// record exactly as a checkpoint layer is; the Linear prepares its own copy of
// the weights, so the caller's memory is read only during this call and the
// result keeps no reference to it (dequantize() is then unavailable).
#include <fmt/format.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>

#include "bindings.hpp"
#include "mixq/error.hpp"
#include "mixq/format.hpp"

namespace mixq::py {
namespace {

// The canonical role of `name` for `format` ("bias", a companion role, or one
// of its aliases); throws for anything the format does not store.
std::string canonical_role(const FormatTraits& format, const std::string& prefix, const std::string& name) {
  if (name == "bias") return name;
  for (const CompanionSpec& c : format.tensors) {
    if (c.role == name) return name;
    for (std::string_view alias : c.aliases)
      if (alias == name) return std::string(c.role);
  }
  std::string known = "bias";
  for (const CompanionSpec& c : format.tensors) known += ", " + std::string(c.role);
  fail("layer '{}' ({}): no tensor role '{}' (the format stores: {})", prefix, format.name, name, known);
}

std::shared_ptr<PyLinear> linear_from_tensors(const std::string& prefix, const std::string& marker_json,
                                              nb::dict tensors, const std::string& kernel) {
  nlohmann::json marker;
  try {
    marker = nlohmann::json::parse(marker_json);
  } catch (const nlohmann::json::exception& e) {
    fail("layer '{}': the marker is not JSON ({})", prefix, e.what());
  }
  if (!marker.is_null() && !marker.is_object())
    fail("layer '{}': the marker must be a JSON object or null, found {}", prefix, marker.dump());

  auto own = std::make_unique<Layer>();
  Layer& layer = *own;
  layer.prefix = prefix;
  if (marker.is_null() || marker.empty()) {
    layer.format = &unquantized_format();
  } else {
    auto name = marker.find("format");
    if (name == marker.end() || !name->is_string())
      fail("layer '{}': the marker has no \"format\" string: {}", prefix, marker.dump());
    layer.format = find_format(name->get<std::string>());
    if (layer.format == nullptr) fail("layer '{}': unknown quantization format '{}'", prefix, name->get<std::string>());
    layer.marker_source = "memory";
    nlohmann::json params = marker;
    params.erase("format");
    layer.params = apply_defaults(*layer.format, params);
  }
  layer.declared_format = std::string(layer.format->name);

  // Views of the caller's buffers, alive for the duration of this call.
  std::vector<nb::ndarray<nb::ro, uint8_t, nb::c_contig, nb::device::cpu>> keep;
  for (auto [key, value] : tensors) {
    if (!nb::isinstance<nb::str>(key)) fail("layer '{}': tensor roles must be strings", prefix);
    const std::string role = canonical_role(*layer.format, prefix, nb::cast<std::string>(key));
    nb::tuple entry;
    if (!nb::try_cast(value, entry) || entry.size() != 3)
      fail("layer '{}': tensor '{}' must be a (dtype, shape, bytes) tuple", prefix, role);
    const std::string dtype_text = nb::cast<std::string>(entry[0]);
    const std::optional<DType> dtype = parse_dtype(dtype_text);
    if (!dtype) fail("layer '{}': tensor '{}' has unsupported dtype '{}'", prefix, role, dtype_text);
    Shape shape;
    for (nb::handle d : entry[1]) {
      const int64_t extent = nb::cast<int64_t>(d);
      if (extent < 0) fail("layer '{}': tensor '{}' has a negative extent", prefix, role);
      shape.push_back(extent);
    }
    nb::ndarray<nb::ro, uint8_t, nb::c_contig, nb::device::cpu> bytes;
    if (!nb::try_cast(entry[2], bytes, /*convert=*/false) || bytes.ndim() != 1)
      fail("layer '{}': tensor '{}' data must be a contiguous 1-D uint8 CPU array", prefix, role);
    const auto* data = reinterpret_cast<const std::byte*>(bytes.data());
    TensorView view{prefix + "." + role, *dtype, shape, {data, bytes.shape(0)}, 0, 0};
    if (!layer.tensors.emplace(role, view).second)
      fail("layer '{}': tensor role '{}' given twice (under two spellings)", prefix, role);
    keep.push_back(bytes);
  }

  auto result = std::make_shared<PyLinear>();
  nb::gil_scoped_release release;  // the buffers stay referenced by `keep`
  if (const TensorView* w = layer.find("weight"); w && w->rank() == 2) {
    layer.out_features = w->shape[0];
    layer.in_features = w->shape[1];
  }
  validate_layer(layer);
  result->linear = Linear::create(layer, linear_options(prefix, kernel));
  result->method = layer.format->method ? layer.format->method(layer) : std::string();
  result->stored_bytes = layer.bytes();
  layer.tensors.clear();  // views of memory this Linear does not own
  result->own = std::move(own);
  result->layer = result->own.get();
  return result;
}

}  // namespace

void bind_from_tensors(nb::module_& m) {
  m.def("_linear_from_tensors", &linear_from_tensors, nb::arg("prefix"), nb::arg("marker"),
        nb::arg("tensors"), nb::arg("kernel") = "auto",
        "A Linear from tensors in memory. marker: the comfy_quant JSON text (\"null\"\n"
        "for an unquantized layer); tensors: {role: (safetensors dtype, shape, the\n"
        "bytes as a contiguous 1-D uint8 array)}. The weights are copied into the\n"
        "Linear's own prepared layout; dequantize() is not available on it.");
}

}  // namespace mixq::py
