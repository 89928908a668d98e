// mixq plan CHECKPOINT [--profile comfyui|sglang|sglang-minimax-h3] [--tp N]
//                      [--max-tp] [--json]
// Resolves every layer and reports what would run it (docs/CLI.md). The
// report is printed even when the checkpoint is rejected; then the error goes
// to stderr as "mixq: error: ..." and the exit status is 1.
#include <iostream>

#include <fmt/format.h>

#include "cli/commands.hpp"
#include "cli/output.hpp"
#include "mixq/checkpoint.hpp"
#include "mixq/error.hpp"
#include "mixq/plan.hpp"

namespace mixq::cli {
namespace {

using nlohmann::json;

std::string split_text(const LayerPlan& layer) {
  if (layer.parallel == Parallel::column && layer.parts > 1) return fmt::format("column x{}", layer.parts);
  return std::string(parallel_name(layer.parallel));
}

std::string degrees_text(const std::vector<int>& degrees) {
  if (degrees.empty()) return "none";
  std::string text;
  for (int d : degrees) text += (text.empty() ? "" : " ") + std::to_string(d);
  return text;
}

void print_table(const Plan& plan, const std::vector<int>* max_tp) {
  std::cout << fmt::format("profile {}, tp {}: {}\n", plan.profile(), plan.tp(),
                           plan.accepted() ? "accepted" : "REJECTED");
  if (!plan.runtime_config().empty()) std::cout << "runtime config: " << esc(plan.runtime_config()) << "\n";
  std::cout << "\n";
  Table table({"layer", "format", "method", "out x in", "split", "tp", "reason"});
  for (const LayerPlan& l : plan.layers()) {
    const std::string format = l.format_name();
    table.add({l.prefix(), format.empty() ? "-" : format, l.method,
               fmt::format("{} x {}", l.layer.out_features, l.layer.in_features), split_text(l),
               l.admits_tp ? "ok" : "no", !l.reason.empty() && l.reason == plan.error() ? "(the error below)" : l.reason});
  }
  std::cout << table.str();
  if (max_tp) std::cout << "\nadmitted tp degrees (1..64): " << degrees_text(*max_tp) << "\n";
  if (!plan.warnings().empty()) {
    constexpr size_t kShown = 4;
    std::cout << "\nwarnings:\n";
    for (size_t i = 0; i < plan.warnings().size() && i < kShown; ++i)
      std::cout << "  - " << esc(plan.warnings()[i]) << "\n";
    if (plan.warnings().size() > kShown)
      std::cout << fmt::format("  ... and {} more (--json or mixq inspect lists them all)\n",
                               plan.warnings().size() - kShown);
  }
}

}  // namespace

void add_plan(CLI::App& root) {
  auto* cmd = root.add_subcommand("plan", "Resolve every layer's method under a runtime profile and a TP degree");
  static std::vector<std::string> paths;
  static std::string profile = "comfyui";
  static int tp = 1;
  static bool max_tp = false;
  static bool as_json = false;
  cmd->add_option("checkpoint", paths, "a .safetensors file, an index.json, or a folder of shards")
      ->required();
  cmd->add_option("--profile", profile, "runtime whose acceptance rules apply")
      ->check(CLI::IsMember({"comfyui", "sglang", "sglang-minimax-h3"}));
  cmd->add_option("--tp", tp, "tensor-parallel degree to check layer by layer")->check(CLI::Range(1, 1 << 16));
  cmd->add_flag("--max-tp", max_tp, "list every degree 1..64 the whole checkpoint admits");
  cmd->add_flag("--json", as_json, "print one JSON object");
  cmd->callback([] {
    Checkpoint checkpoint = Checkpoint::open(paths);
    Plan plan = Plan::build(checkpoint, PlanOptions{profile, tp});
    checkpoint.check_intact();  // markers were read from the mapping
    std::vector<int> degrees;
    if (max_tp) degrees = plan.admitted_tp(64);
    if (as_json) {
      json report = plan.to_json();
      if (max_tp) report["max_tp"] = degrees;
      print_json(std::move(report));
    } else {
      print_table(plan, max_tp ? &degrees : nullptr);
    }
    std::cout.flush();
    plan.require_accepted();
  });
}

}  // namespace mixq::cli
