// mixq dequantize CHECKPOINT --layer PREFIX -o OUT.npy [--basis original|stored]
// Writes one layer's weight as float32 [out_features, in_features] through its
// format record (docs/CLI.md). `original` undoes ConvRot rotations, `stored`
// keeps the rotated basis the checkpoint stores.
#include <algorithm>
#include <iostream>

#include <fmt/format.h>

#include "cli/commands.hpp"
#include "cli/output.hpp"
#include "io/file_checks.hpp"
#include "mixq/checkpoint.hpp"
#include "mixq/error.hpp"
#include "mixq/format.hpp"
#include "mixq/layer.hpp"
#include "mixq/marker.hpp"
#include "mixq/npy.hpp"

namespace mixq::cli {
namespace {

// Up to five layer prefixes closest to `wanted` by shared leading characters,
// so a typo gets a useful hint.
std::string nearby_layers(const LayerSet& set, const std::string& wanted) {
  std::vector<std::pair<size_t, std::string>> scored;
  for (const Layer& l : set.layers) {
    const auto mismatch = std::mismatch(wanted.begin(), wanted.end(), l.prefix.begin(), l.prefix.end());
    scored.emplace_back(static_cast<size_t>(mismatch.first - wanted.begin()), l.prefix);
  }
  std::stable_sort(scored.begin(), scored.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::string out;
  for (size_t i = 0; i < scored.size() && i < 5; ++i) out += (i ? ", " : "") + scored[i].second;
  return out.empty() ? "none" : out;
}

void run(const std::vector<std::string>& paths, const std::string& prefix, const std::string& output,
         const std::string& basis_name, bool quiet) {
  const Basis basis = basis_name == "stored" ? Basis::stored : Basis::original;
  const Checkpoint checkpoint = Checkpoint::open(paths);
  refuse_output_over_inputs(output, checkpoint.source_paths());
  const LayerSet set = group_layers(checkpoint, collect_markers(checkpoint));
  const auto it = std::find_if(set.layers.begin(), set.layers.end(), [&](const Layer& l) { return l.prefix == prefix; });
  if (it == set.layers.end())
    fail("no layer '{}' in {} ({} layers; closest: {})", prefix, paths.front(), set.layers.size(),
         nearby_layers(set, prefix));
  const Layer& layer = *it;
  if (!layer.problem.empty()) fail("{}", layer.problem);
  if (!layer.format->dequantize)
    fail("layer '{}': format '{}' cannot be dequantized", layer.prefix, layer.format->name);
  const int64_t n = layer.out_features, k = layer.in_features;
  if (n <= 0 || k <= 0) fail("layer '{}': logical shape [{}, {}] is empty", layer.prefix, n, k);
  std::vector<float> weight(static_cast<size_t>(n) * static_cast<size_t>(k));
  layer.format->dequantize(layer, basis, weight.data());
  checkpoint.check_intact();
  write_npy(output, {n, k}, weight.data());
  if (!quiet) {
    for (const std::string& w : layer.warnings) print_warning(w);
    std::cout << fmt::format("{}: {} [{}, {}] ({} basis) -> {}\n", esc(layer.prefix), layer.format->name, n, k,
                             basis_name, esc(output));
  }
}

}  // namespace

void add_dequantize(CLI::App& root) {
  auto* cmd = root.add_subcommand("dequantize", "Write one layer's weight as float32 .npy [out, in]");
  static std::vector<std::string> paths;
  static std::string prefix;
  static std::string output;
  static std::string basis = "original";
  static bool quiet = false;
  cmd->add_option("checkpoint", paths, "a .safetensors file, an index.json, or a folder of shards")->required();
  cmd->add_option("--layer", prefix, "layer prefix, e.g. blocks.0.attn.qkv_proj")->required();
  cmd->add_option("-o,--output", output, "output .npy file (float32, C order)")->required();
  cmd->add_option("--basis", basis, "original: undo ConvRot rotations (default); stored: keep the stored basis")
      ->check(CLI::IsMember({"original", "stored"}));
  cmd->add_flag("--quiet", quiet, "print nothing on success");
  cmd->callback([] { run(paths, prefix, output, basis, quiet); });
}

}  // namespace mixq::cli
