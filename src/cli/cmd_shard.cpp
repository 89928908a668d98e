// mixq shard CHECKPOINT --tp N [--profile comfyui|sglang|sglang-minimax-h3] -o DIR [--json]
// Writes one checkpoint per tensor-parallel rank (rank0.safetensors, ...) and
// the index mixq-shard.json into DIR, atomically; refuses (exit 1, nothing
// written) when the plan does not admit --tp N, naming the first layer.
#include <iostream>

#include <fmt/format.h>

#include "cli/commands.hpp"
#include "cli/output.hpp"
#include "mixq/tp_shards.hpp"

namespace mixq::cli {
namespace {

void print_summary(const ShardReport& r) {
  Table table({"rank", "file", "tensors", "bytes"}, {0, 2, 3});
  for (const auto& rank : r.index["ranks"])
    table.add({std::to_string(rank["rank"].get<int>()), rank["file"].get<std::string>(),
               std::to_string(rank["tensors"].get<size_t>()), human_bytes(rank["bytes"].get<uint64_t>())});
  std::cout << table.str();
  int column = 0, fused = 0, row = 0, replicated = 0;
  for (const auto& l : r.index["layers"]) {
    const std::string split = l["parallel"];
    if (split == "column") ++column, fused += l["parts"].get<int>() > 1;
    else if (split == "row") ++row;
    else ++replicated;
  }
  uint64_t total = 0;
  for (uint64_t b : r.rank_bytes) total += b;
  std::cout << fmt::format("{} linear layers: {} column ({} fused), {} row, {} replicated; {} other tensors on every rank\n",
                           r.index["layers"].size(), column, fused, row, replicated,
                           r.index["replicated_tensors"].get<size_t>());
  std::cout << fmt::format("{} -> {} ranks, {} in all, in {:.2f} s\n", human_bytes(r.source_bytes),
                           r.rank_bytes.size(), human_bytes(total), r.seconds);
  std::cout << "  " << esc(r.folder) << "\n";
}

}  // namespace

void add_shard(CLI::App& root) {
  auto* cmd = root.add_subcommand("shard", "Write one checkpoint per tensor-parallel rank");
  static std::vector<std::string> paths;
  static ShardOptions options;
  static bool as_json = false;
  cmd->add_option("checkpoint", paths, "a .safetensors file, an index.json, or a folder of shards")->required();
  cmd->add_option("--tp", options.degree, "tensor-parallel degree (ranks)")->required()->check(CLI::Range(1, 1 << 16));
  cmd->add_option("--profile", options.profile, "runtime whose plan must admit the split")
      ->check(CLI::IsMember({"comfyui", "sglang", "sglang-minimax-h3"}));
  cmd->add_option("-o,--output", options.output, "output folder (must not exist, or be empty)")->required();
  cmd->add_flag("--json", as_json, "print the index (mixq-shard.json) as JSON");
  cmd->callback([] {
    const ShardReport report = write_tp_shards(paths, options);
    if (as_json)
      print_json(report.index);
    else
      print_summary(report);
  });
}

}  // namespace mixq::cli
