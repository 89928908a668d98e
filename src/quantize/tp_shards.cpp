// write_tp_shards (`mixq shard`, mixq/tp_shards.hpp): one Comfy checkpoint per
// tensor-parallel rank plus the index mixq-shard.json (docs/TP.md), staged in
// a hidden folder next to the output and renamed into place only when every
// file is complete. The output checks, the header markers and the staging
// folder are the quantizer's (stages.hpp, staging.hpp). Memory stays at one
// layer's shard: each rank is written in two passes over the layers (declare
// the shapes, then shard again and write the bytes).
#include "mixq/tp_shards.hpp"

#include <chrono>
#include <filesystem>
#include <set>

#include <fmt/format.h>

#include "io/atomic_file.hpp"
#include "io/file_checks.hpp"
#include "mixq/checkpoint.hpp"
#include "mixq/error.hpp"
#include "mixq/marker.hpp"
#include "mixq/plan.hpp"
#include "mixq/safetensors_writer.hpp"
#include "mixq/shard.hpp"
#include "quantize/stages.hpp"
#include "quantize/staging.hpp"

namespace mixq {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The source's header metadata for every rank: the first file's keys, and the
// header markers of all files (every rank holds every layer).
std::map<std::string, std::string> source_metadata(const Checkpoint& source) {
  std::map<std::string, std::string> meta;
  if (!source.files().empty()) meta = source.files()[0].metadata;
  meta.erase(std::string(kHeaderMarkersKey));
  const json markers = quantize::source_header_markers(source);
  if (!markers.empty()) meta[std::string(kHeaderMarkersKey)] = header_markers_json(markers);
  return meta;
}

json layer_entry(const Plan& plan, const LayerPlan& lp, int degree) {
  const LayerShard rank0 = shard_layer(plan, lp, 0, degree);
  const std::string format = lp.format_name();
  return {{"prefix", lp.prefix()},
          {"format", format.empty() ? json(nullptr) : json(format)},
          {"parallel", std::string(parallel_name(lp.parallel))},
          {"parts", lp.parts},
          {"out_features", lp.layer.out_features},
          {"in_features", lp.layer.in_features},
          {"rank_out_features", rank0.layer().out_features},
          {"rank_in_features", rank0.layer().in_features}};
}

}  // namespace

ShardReport write_tp_shards(const std::vector<std::string>& sources, const ShardOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  if (options.degree < 1)
    throw UsageError(fmt::format("tensor-parallel degree must be >= 1, got {}", options.degree));
  if (options.output.empty()) throw UsageError("shard: -o DIR is required");
  const Checkpoint source = Checkpoint::open(sources);
  refuse_output_over_inputs(options.output, source.source_paths());  // before anything else is said about -o
  quantize::Target target = quantize::resolve_target(options.output, 0);
  if (!target.folder) fail("{}: the output of mixq shard is a folder, not a file", target.final_path.string());
  const fs::path folder = target.final_path;
  quantize::refuse_overwriting_source(source, target);
  const Plan plan = Plan::build(source, PlanOptions{options.profile, options.degree});
  plan.require_accepted();  // the text of `mixq plan --tp N`: first layer and reason

  ShardReport report;
  report.folder = folder.string();
  std::set<std::string> layer_tensors;
  json layers = json::array();
  for (const LayerPlan& lp : plan.layers()) {
    for (const auto& [role, view] : lp.layer.tensors) layer_tensors.insert(view.name);
    layers.push_back(layer_entry(plan, lp, options.degree));
  }
  std::vector<const TensorView*> replicated;
  for (const TensorView& t : source.tensors()) {
    report.source_bytes += t.data.size();
    if (!layer_tensors.count(t.name)) replicated.push_back(&t);
  }
  const std::map<std::string, std::string> metadata = source_metadata(source);

  quantize::StagingDir staging(target.parent, folder.filename().string(), /*watchdog=*/true);
  json ranks = json::array();
  for (int rank = 0; rank < options.degree; ++rank) {
    const std::string name = fmt::format("rank{}.safetensors", rank);
    std::map<std::string, std::string> meta = metadata;
    meta["mixq_tp"] = json{{"rank", rank}, {"degree", options.degree}, {"profile", options.profile}}.dump();
    SafetensorsWriter writer((staging.path() / name).string(), meta);
    size_t count = 0;
    for (const LayerPlan& lp : plan.layers()) {
      const LayerShard shard = shard_layer(plan, lp, rank, options.degree);
      for (const auto& [role, view] : shard.layer().tensors) {
        writer.declare(view.name, view.dtype, view.shape);
        ++count;
      }
    }
    for (const TensorView* t : replicated) writer.declare(t->name, t->dtype, t->shape);
    count += replicated.size();
    for (const LayerPlan& lp : plan.layers()) {
      const LayerShard shard = shard_layer(plan, lp, rank, options.degree);
      for (const auto& [role, view] : shard.layer().tensors) writer.write(view.data);
    }
    for (const TensorView* t : replicated) writer.write(t->data);
    const uint64_t bytes = writer.data_bytes();
    writer.commit();
    report.rank_bytes.push_back(bytes);
    report.files.push_back((folder / name).string());
    ranks.push_back({{"rank", rank}, {"file", name}, {"tensors", count}, {"bytes", bytes}});
  }

  json source_paths = json::array();
  for (const FileInfo& file : source.files()) source_paths.push_back(fs::absolute(file.path).string());
  report.index = {{"format", "mixq-shard"},
                  {"version", 1},
                  {"degree", options.degree},
                  {"profile", options.profile},
                  {"source", {{"files", source_paths}, {"bytes", report.source_bytes}}},
                  {"ranks", ranks},
                  {"layers", layers},
                  {"replicated_tensors", replicated.size()}};
  {
    const std::string text = report.index.dump(2) + "\n";
    AtomicFile index((staging.path() / kShardIndexName).string());
    index.write_at(0, std::as_bytes(std::span(text)));
    index.commit();
  }
  report.files.push_back((folder / kShardIndexName).string());

  // The ranks were copied from the source's mapping: a source truncated
  // meanwhile gave zeros (io/sigbus_guard.hpp). Nothing goes in place then.
  source.check_intact();
  std::error_code ec;
  fs::rename(staging.path(), folder, ec);
  if (ec) fail("{}: cannot move the finished output into place: {}", folder.string(), ec.message());
  staging.finish();
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

}  // namespace mixq
