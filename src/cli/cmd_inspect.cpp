// mixq inspect CHECKPOINT [--json]: one row per layer, a summary per format,
// the files and any warnings. Reads headers only.
#include <iostream>

#include <fmt/format.h>

#include "cli/commands.hpp"
#include "cli/output.hpp"
#include "mixq/checkpoint.hpp"
#include "mixq/inspect.hpp"

namespace mixq::cli {
namespace {

using nlohmann::json;

std::string params_text(const json& params) {
  std::string text;
  for (const auto& [key, value] : params.items()) {
    if (!text.empty()) text += ",";
    text += key + "=" + (value.is_string() ? value.get<std::string>() : value.dump());
  }
  return text.empty() ? "-" : text;
}

void print_table(const json& report) {
  for (const auto& f : report["files"])
    std::cout << fmt::format("{}: {}, {} tensors, header {}{}\n", esc(f["path"].get<std::string>()),
                             human_bytes(f["bytes"].get<uint64_t>()), f["tensors"].get<int64_t>(),
                             human_bytes(f["header_bytes"].get<uint64_t>()),
                             f["trailing_bytes"].get<uint64_t>()
                                 ? fmt::format(", {} trailing bytes", f["trailing_bytes"].get<uint64_t>())
                                 : "");
  std::cout << "\n";
  Table layers({"layer", "format", "params", "out x in", "bytes"}, {4});
  for (const auto& l : report["layers"])
    layers.add({l["prefix"].get<std::string>(),
                l["format"].is_null() ? "-" : l["format"].get<std::string>(),
                params_text(l["params"]),
                fmt::format("{} x {}", l["out_features"].get<int64_t>(), l["in_features"].get<int64_t>()),
                human_bytes(l["bytes"].get<uint64_t>())});
  std::cout << layers.str() << "\n";
  Table formats({"format", "layers", "bytes", "bits/weight"}, {1, 2, 3});
  for (const auto& [name, total] : report["formats"].items())
    formats.add({name, std::to_string(total["layers"].get<int64_t>()),
                 human_bytes(total["bytes"].get<uint64_t>()),
                 fmt::format("{:.2f}", total["bits_per_weight"].get<double>())});
  std::cout << formats.str();
  if (const auto others = report["other_tensor_count"].get<uint64_t>(); others > 0)
    std::cout << fmt::format("\n{} other tensors (not linear layers)\n", others);
  if (!report["warnings"].empty()) {
    std::cout << "\nwarnings:\n";
    for (const auto& w : report["warnings"]) std::cout << "  - " << esc(w.get<std::string>()) << "\n";
  }
}

}  // namespace

void add_inspect(CLI::App& root) {
  auto* cmd = root.add_subcommand("inspect", "Show every layer's format, parameters, shape and size");
  static std::vector<std::string> paths;
  static bool as_json = false;
  cmd->add_option("checkpoint", paths, "a .safetensors file, an index.json, or a folder of shards")
      ->required();
  cmd->add_flag("--json", as_json, "print one JSON object");
  cmd->callback([] {
    Checkpoint checkpoint = Checkpoint::open(paths);
    json report = inspect_report(checkpoint, /*list_other_tensors=*/as_json);
    checkpoint.check_intact();  // markers were read from the mapping
    if (as_json)
      print_json(std::move(report));
    else
      print_table(report);
  });
}

}  // namespace mixq::cli
