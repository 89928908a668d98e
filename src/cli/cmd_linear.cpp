// mixq linear CHECKPOINT --layer PREFIX -i X.npy -o Y.npy [--kernel auto|ref] [--threads N]
// Runs one layer's quantized linear (bias included) on X [M, in_features] and
// writes Y [M, out_features] as float32 (docs/CLI.md).
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
#include "mixq/linear.hpp"
#include "mixq/marker.hpp"
#include "mixq/npy.hpp"

namespace mixq::cli {
namespace {

struct Options {
  std::vector<std::string> paths;
  std::string prefix, input, output, kernel = "auto";
  int threads = 0;
  bool quiet = false;
};

// Formats that pad K (NVFP4 to 16, MXFP8 to 32) and store no logical K report
// the stored K as in_features (Layer::k_pad_unit). Only then may X omit the
// padding columns: they are zeros and change nothing.
bool is_padding_of(const Layer& layer, int64_t cols, int64_t k) {
  return cols < k && k - cols < layer.k_pad_unit;
}

void run(const Options& o) {
  const Checkpoint checkpoint = Checkpoint::open(o.paths);
  std::vector<std::string> inputs = checkpoint.source_paths();
  inputs.push_back(o.input);
  refuse_output_over_inputs(o.output, inputs);
  const LayerSet set = group_layers(checkpoint, collect_markers(checkpoint));
  const auto it = std::find_if(set.layers.begin(), set.layers.end(),
                               [&](const Layer& l) { return l.prefix == o.prefix; });
  if (it == set.layers.end())
    fail("no layer '{}' in {} ({} layers)", o.prefix, o.paths.front(), set.layers.size());
  const Layer& layer = *it;
  if (!layer.problem.empty()) fail("{}", layer.problem);

  const NpyArray x = read_npy(o.input);
  if (x.shape.empty() || x.shape.size() > 2)
    fail("{}: expected a 2-D array [M, {}], found shape {}", o.input, layer.in_features,
         shape_str(x.shape));
  const int64_t m = x.shape.size() == 2 ? x.shape[0] : 1;
  const int64_t cols = x.shape.back();

  if (o.threads > 0) set_num_threads(o.threads);
  LinearOptions options;
  options.kernel = o.kernel == "ref" ? KernelChoice::reference : KernelChoice::automatic;
  const std::unique_ptr<Linear> linear = Linear::create(layer, options);
  const int64_t k = linear->in_features(), n = linear->out_features();

  std::vector<float> padded;
  const float* xin = x.values.data();
  if (cols != k) {
    if (!is_padding_of(layer, cols, k))
      fail("{}: X has {} columns, layer '{}' takes {} (in_features)", o.input, cols, layer.prefix, k);
    padded.assign(static_cast<size_t>(m * k), 0.0f);
    for (int64_t r = 0; r < m; ++r)
      std::copy_n(x.values.begin() + r * cols, cols, padded.begin() + r * k);
    xin = padded.data();
  }
  std::vector<float> y(static_cast<size_t>(m * n));
  linear->forward(xin, m, y.data());
  checkpoint.check_intact();
  const Shape out_shape = x.shape.size() == 2 ? Shape{m, n} : Shape{n};
  write_npy(o.output, out_shape, y.data());
  if (!o.quiet)
    std::cout << fmt::format("{}: {} [{}, {}] x [{}, {}] -> {} ({} kernel, {} threads)\n", esc(layer.prefix),
                             layer.format->name, n, k, m, cols, esc(o.output), linear->kernel_name(),
                             num_threads());
}

}  // namespace

void add_linear(CLI::App& root) {
  auto* cmd = root.add_subcommand("linear", "Run one layer's quantized linear on X.npy, write Y.npy");
  static Options o;
  cmd->add_option("checkpoint", o.paths, "a .safetensors file, an index.json, or a folder of shards")
      ->required();
  cmd->add_option("--layer", o.prefix, "layer prefix")->required();
  cmd->add_option("-i,--input", o.input, "X: .npy [M, in_features], <f4 or <f2")->required();
  cmd->add_option("-o,--output", o.output, "Y: .npy [M, out_features], float32")->required();
  cmd->add_option("--kernel", o.kernel, "auto: fastest for this CPU (default); ref: reference")
      ->check(CLI::IsMember({"auto", "ref"}));
  cmd->add_option("--threads", o.threads, "threads (default: all cores)")->check(CLI::NonNegativeNumber);
  cmd->add_flag("--quiet", o.quiet, "print nothing on success");
  cmd->callback([] { run(o); });
}

}  // namespace mixq::cli
