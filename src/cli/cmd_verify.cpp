// mixq verify CHECKPOINT [--against SOURCE] [--json] [--max-rel-error X]
// Prints one row per quantized layer (or the JSON report), then exits 1 with a
// one-line error naming the first failed layer when any check fails.
#include <iostream>

#include <fmt/format.h>

#include "cli/commands.hpp"
#include "cli/output.hpp"
#include "mixq/checkpoint.hpp"
#include "mixq/error.hpp"
#include "mixq/verify.hpp"

namespace mixq::cli {
namespace {

std::string failed_checks(const VerifiedLayer& v) {
  std::string text;
  for (const LayerCheck& c : v.checks)
    if (!c.ok) text += fmt::format("{}{}: {}", text.empty() ? "" : "; ", c.name, c.detail);
  return text;
}

void print_table(const VerifyReport& report, bool with_source) {
  std::vector<std::string> header{"layer", "format", "out x in"};
  if (with_source) header.push_back("rel.error");
  header.push_back("result");
  Table table(header, with_source ? std::vector<size_t>{3} : std::vector<size_t>{});
  for (const VerifiedLayer& v : report.layers) {
    std::vector<std::string> row{v.prefix, v.format, fmt::format("{} x {}", v.out_features, v.in_features)};
    if (with_source) row.push_back(v.rel_error ? fmt::format("{:.4f}", *v.rel_error) : "-");
    row.push_back(v.ok ? "ok" : "FAIL " + failed_checks(v));
    table.add(std::move(row));
  }
  std::cout << table.str();
  std::cout << fmt::format("\n{} quantized layers checked ({} unquantized), {} failed\n",
                           report.layers.size(), report.unquantized_layers, report.failed);
  for (const auto& w : report.warnings) std::cout << "warning: " << esc(w) << "\n";
}

}  // namespace

void add_verify(CLI::App& root) {
  auto* cmd = root.add_subcommand("verify", "Check that every quantized layer decodes and looks sane");
  static std::vector<std::string> paths;
  static std::vector<std::string> against;
  static bool as_json = false;
  static std::optional<double> max_error;
  cmd->add_option("checkpoint", paths, "a .safetensors file, an index.json, or a folder of shards")
      ->required();
  cmd->add_option("--against", against, "the float source: report each layer's relative error");
  cmd->add_option("--max-rel-error,--max-error", max_error,
                  "relative error above which a layer fails (default: 3x its format's expected error)")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--json", as_json, "print one JSON object");
  cmd->callback([] {
    Checkpoint checkpoint = Checkpoint::open(paths);
    std::optional<Checkpoint> source;
    if (!against.empty()) source.emplace(Checkpoint::open(against));
    VerifyOptions options;
    options.max_rel_error = max_error;
    VerifyReport report = verify_checkpoint(checkpoint, source ? &*source : nullptr, options);
    checkpoint.check_intact();
    if (source) source->check_intact();
    if (as_json)
      print_json(verify_report_json(report));
    else
      print_table(report, source.has_value());
    std::cout.flush();
    if (!report.ok()) {
      for (const VerifiedLayer& v : report.layers)
        if (!v.ok)
          fail("verify: {} of {} quantized layers failed; first: layer '{}' ({}): {}", report.failed,
               report.layers.size(), v.prefix, v.format, failed_checks(v));
    }
  });
}

}  // namespace mixq::cli
