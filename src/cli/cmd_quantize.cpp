// mixq quantize SOURCE -o OUT (--recipe FILE | --rule PATTERN=FORMAT[:k=v,..] ..)
//   [--markers tensor|header|both] [--shard-size SIZE] [--quiet] [--json]
// --rule rules are tried before the rules of --recipe. A progress line is drawn
// on stderr when it is a terminal; a one-line summary goes to stdout.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <map>

#include <fmt/format.h>

#include "cli/commands.hpp"
#include "cli/output.hpp"
#include "io/file_checks.hpp"
#include "mixq/error.hpp"
#include "mixq/quantize.hpp"
#include "mixq/recipe.hpp"

namespace mixq::cli {
namespace {

struct Args {
  std::vector<std::string> source;
  std::string output;
  std::string recipe_file;
  std::vector<std::string> rules;
  std::string markers = "tensor";
  std::string shard_size;
  bool quiet = false;
  bool json = false;
};

Recipe build_recipe(const Args& args) {
  if (args.recipe_file.empty() && args.rules.empty())
    throw UsageError("quantize: give --recipe FILE or at least one --rule PATTERN=FORMAT");
  Recipe recipe;
  if (!args.recipe_file.empty()) recipe = load_recipe(args.recipe_file);
  std::vector<RecipeRule> rules;
  for (size_t i = 0; i < args.rules.size(); ++i)
    rules.push_back(parse_rule(args.rules[i], fmt::format("--rule {}", i + 1)));
  recipe.rules.insert(recipe.rules.begin(), rules.begin(), rules.end());
  return recipe;
}

// A single self-overwriting line on a terminal, at most ~10 updates a second.
class ProgressLine {
 public:
  void operator()(const QuantizeProgress& p) {
    auto now = std::chrono::steady_clock::now();
    bool last = p.done == p.total;
    if (!last && now - shown_ < std::chrono::milliseconds(100)) return;
    shown_ = now;
    if (phase_ != p.phase) {
      phase_ = std::string(p.phase);
      phase_start_ = now;
    }
    double seconds = std::chrono::duration<double>(now - phase_start_).count();
    double rate = seconds > 0 ? static_cast<double>(p.bytes_done) / seconds : 0;
    const int filled = p.bytes_total ? static_cast<int>(20 * p.bytes_done / p.bytes_total) : 20;
    std::string bar = std::string(filled, '#') + std::string(20 - filled, '.');
    std::string line = fmt::format(
        "{:<8} [{}] {:>5}/{:<5} {}  {} / {}  {}/s", p.phase, bar, p.done, p.total,
        p.phase == "quantize" ? "layers " : "tensors", human_bytes(p.bytes_done),
        human_bytes(p.bytes_total), human_bytes(static_cast<uint64_t>(rate)));
    std::fprintf(stderr, "\r%-78s", line.c_str());
    if (last && p.phase == "write") std::fprintf(stderr, "\n");
    std::fflush(stderr);
  }

 private:
  std::chrono::steady_clock::time_point shown_{};
  std::chrono::steady_clock::time_point phase_start_{};
  std::string phase_;
};

void print_summary(const QuantizeReport& r) {
  std::map<std::string, int> formats;
  int kept = 0, fell_back = 0;
  for (const auto& l : r.layers) {
    if (l.format == "keep") ++kept;
    else formats[l.format]++;
    fell_back += l.fell_back;
  }
  std::string mix;
  for (const auto& [name, count] : formats) mix += fmt::format("{}{} {}", mix.empty() ? "" : ", ", count, name);
  double gbps = r.seconds > 0 ? static_cast<double>(r.source_bytes) / r.seconds / 1e9 : 0;
  std::cout << fmt::format("{} of {} linear layers quantized ({}); {} kept{}\n", r.layers.size() - kept,
                           r.layers.size(), mix.empty() ? "none" : mix, kept,
                           fell_back ? fmt::format(" ({} by fallback=keep)", fell_back) : "");
  std::cout << fmt::format("{} -> {} in {:.2f} s ({:.2f} GB/s of source)\n", human_bytes(r.source_bytes),
                           human_bytes(r.output_bytes), r.seconds, gbps);
  for (const auto& f : r.files) std::cout << "  " << esc(f) << "\n";
}

}  // namespace

void add_quantize(CLI::App& root) {
  auto* cmd = root.add_subcommand("quantize", "Quantize a float checkpoint with a per-layer recipe");
  static Args args;
  cmd->add_option("source", args.source, "float checkpoint: .safetensors, index.json or folder")
      ->required();
  cmd->add_option("-o,--output", args.output,
                  "output .safetensors file, or a folder (always a folder with --shard-size)")
      ->required();
  cmd->add_option("--recipe", args.recipe_file, "recipe JSON file (see recipes/)");
  cmd->add_option("--rule", args.rules,
                  "PATTERN=FORMAT[:key=value,...]; repeatable, tried in order before --recipe");
  cmd->add_option("--markers", args.markers, "where markers go: tensor (default), header, both");
  cmd->add_option("--shard-size", args.shard_size, "split output into shards of about SIZE (e.g. 2GB)");
  cmd->add_flag("--quiet", args.quiet, "no progress, no summary");
  cmd->add_flag("--json", args.json, "print the report as JSON");
  cmd->callback([] {
    QuantizeOptions options;
    options.output = args.output;
    options.markers = parse_marker_dialect(args.markers);
    if (!args.shard_size.empty()) options.shard_size = parse_byte_size(args.shard_size);
    if (!args.recipe_file.empty()) refuse_output_over_inputs(args.output, {args.recipe_file});
    Recipe recipe = build_recipe(args);
    ProgressLine line;
    if (!args.quiet && isatty(STDERR_FILENO))
      options.progress = [&line](const QuantizeProgress& p) { line(p); };
    QuantizeReport report = quantize_checkpoint(args.source, recipe, options);
    if (!args.quiet)
      for (const auto& w : report.warnings) print_warning(w);
    if (args.json)
      print_json(quantize_report_json(report));
    else if (!args.quiet)
      print_summary(report);
  });
}

}  // namespace mixq::cli
