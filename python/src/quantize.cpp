// mixq.quantize(source, out, rules=[...] | recipe=...): `mixq quantize`.
#include <fmt/format.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.hpp"
#include "mixq/error.hpp"
#include "mixq/quantize.hpp"
#include "mixq/recipe.hpp"

namespace mixq::py {
namespace {

std::string fspath(nb::handle path) {
  nb::object text = nb::module_::import_("os").attr("fspath")(path);
  if (!nb::isinstance<nb::str>(text)) fail("quantize: paths must be text, got bytes");
  return nb::cast<std::string>(text);
}

std::vector<std::string> sources(nb::handle source) {
  std::vector<std::string> paths;
  if (nb::isinstance<nb::list>(source) || nb::isinstance<nb::tuple>(source)) {
    for (nb::handle item : source) paths.push_back(fspath(item));
    if (paths.empty()) fail("quantize: the list of source paths is empty");
  } else {
    paths.push_back(fspath(source));
  }
  return paths;
}

// `rules`: list of "PATTERN=FORMAT[:key=value,..]" (the CLI's --rule);
// `recipe`: a recipe file path or a recipe dict (the CLI's --recipe).
Recipe make_recipe(nb::handle rules, nb::handle recipe) {
  if (rules.is_none() == recipe.is_none())
    fail("quantize: give exactly one of rules=[...] or recipe=");
  if (!rules.is_none()) {
    if (nb::isinstance<nb::str>(rules))
      fail("quantize: rules must be a list of 'PATTERN=FORMAT[:key=value,..]' strings, not one string");
    Recipe result;
    size_t i = 0;
    for (nb::handle rule : rules) {
      if (!nb::isinstance<nb::str>(rule)) fail("quantize: rules[{}] is not a string", i);
      result.rules.push_back(parse_rule(nb::cast<std::string>(rule), fmt::format("rules[{}]", i)));
      ++i;
    }
    if (result.rules.empty()) fail("quantize: rules is empty");
    return result;
  }
  if (nb::isinstance<nb::dict>(recipe)) {
    nb::object dumps = nb::module_::import_("json").attr("dumps");
    std::string text = nb::cast<std::string>(dumps(recipe));
    nlohmann::json json;
    try {
      json = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {
      fail("quantize: recipe dict is not valid JSON: {}", e.what());
    }
    return parse_recipe(json, "recipe dict");
  }
  return load_recipe(fspath(recipe));
}

nb::object quantize(nb::handle source, nb::handle out, nb::handle rules, nb::handle recipe,
                    const std::string& markers, nb::handle shard_size) {
  std::vector<std::string> source_paths = sources(source);
  Recipe parsed = make_recipe(rules, recipe);
  QuantizeOptions options;
  options.output = fspath(out);
  options.markers = parse_marker_dialect(markers);
  if (nb::isinstance<nb::str>(shard_size))
    options.shard_size = parse_byte_size(nb::cast<std::string>(shard_size));
  else if (!shard_size.is_none()) {
    int64_t bytes = nb::cast<int64_t>(shard_size);
    if (bytes < 0) fail("quantize: shard_size must be >= 0, got {}", bytes);
    options.shard_size = static_cast<uint64_t>(bytes);
  }
  nlohmann::json json;
  {
    nb::gil_scoped_release release;
    json = quantize_report_json(quantize_checkpoint(source_paths, parsed, options));
  }
  return to_python(json);
}

}  // namespace

void bind_quantize(nb::module_& m) {
  m.def("quantize", &quantize, nb::arg("source"), nb::arg("out"), nb::kw_only(),
        nb::arg("rules") = nb::none(), nb::arg("recipe") = nb::none(),
        nb::arg("markers") = "tensor", nb::arg("shard_size") = nb::none(),
        "Quantizes a float checkpoint into a Comfy checkpoint, like `mixq quantize`.\n"
        "rules: list of 'PATTERN=FORMAT[:key=value,..]' (first match wins, 'keep'\n"
        "leaves a layer as is); or recipe: a recipe file path or dict. markers:\n"
        "'tensor', 'header' or 'both'. shard_size: bytes or text like '2GB'.\n"
        "Returns the report: files, layers, source_bytes, output_bytes, ...");
}

}  // namespace mixq::py
