// mixq quantize: the stages in order (quantize/stages.hpp). Pass 1 quantizes
// layer by layer into a spill file, pass 2 streams everything into
// SafetensorsWriter(s) in a staging folder, which is then renamed into place
// (include/mixq/quantize.hpp explains why).
#include "mixq/quantize.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>

#include <fmt/format.h>

#include "io/file_checks.hpp"
#include "io/shard_index.hpp"
#include "mixq/checkpoint.hpp"
#include "mixq/error.hpp"
#include "mixq/format.hpp"
#include "mixq/layer.hpp"
#include "mixq/threads.hpp"
#include "mixq/marker.hpp"
#include "mixq/safetensors_writer.hpp"
#include "quantize/staging.hpp"
#include "quantize/stages.hpp"
#include "util/parallel.hpp"

namespace mixq {
namespace fs = std::filesystem;
using namespace quantize;

namespace {

// f32 weights of one batch of layers quantized side by side.
constexpr uint64_t kBatchBytes = uint64_t{256} << 20;

struct Job {
  const Layer* layer;
  const RecipeRule* rule;
};

// The recipe's decision for every candidate layer; warns about rules that
// matched nothing.
std::vector<Job> decide(const LayerSet& set, const Recipe& recipe, QuantizeReport& report) {
  std::vector<Job> jobs;
  std::vector<bool> rule_used(recipe.rules.size(), false);
  for (const Layer& layer : set.layers) {
    if (!is_candidate(layer)) continue;
    const RecipeRule& rule = recipe.decide(layer.prefix);
    for (size_t i = 0; i < recipe.rules.size(); ++i)
      if (&recipe.rules[i] == &rule) rule_used[i] = true;
    jobs.push_back({&layer, &rule});
  }
  for (size_t i = 0; i < recipe.rules.size(); ++i)
    if (!rule_used[i])
      report.warnings.push_back(fmt::format("{}: pattern '{}' matched no float linear layer",
                                            recipe.rules[i].origin, recipe.rules[i].match));
  return jobs;
}

QuantizedLayerReport layer_entry(const Layer& layer) {
  const TensorView& weight = layer.tensor("weight");
  QuantizedLayerReport entry;
  entry.prefix = layer.prefix;
  entry.out_features = weight.shape[0];
  entry.in_features = weight.shape[1];
  entry.source_bytes = weight.data.size();
  return entry;
}

// What pass 1 produced: the quantized tensors (spilled) and markers.
struct Quantized {
  std::vector<OutTensor> out;
  std::set<std::string> replaced;  // source weights superseded by quantized ones
  nlohmann::json header_markers = nlohmann::json::object();
};

// Appends one quantized layer's tensors (and its marker tensor) to the output.
void add_layer_output(const Layer& layer, LayerResult& r, const QuantizeOptions& options, SpillFile& spill,
                      Quantized& result, QuantizedLayerReport& entry) {
  for (OwnedTensor& t : r.q.tensors) {
    OutTensor o;
    o.name = layer.prefix + "." + t.name;
    o.dtype = t.dtype;
    o.shape = t.shape;
    o.bytes = t.data.size();
    o.spilled = true;
    o.spill_offset = spill.append(t.data);
    o.unit = layer.prefix;
    entry.output_bytes += o.bytes;
    result.out.push_back(std::move(o));
    std::vector<std::byte>().swap(t.data);
  }
  if (options.markers != MarkerDialect::header) {
    const std::string text = marker_json(r.marker);
    OutTensor o;
    o.name = layer.prefix + std::string(kMarkerSuffix);
    o.dtype = DType::U8;
    o.shape = {static_cast<int64_t>(text.size())};
    o.bytes = text.size();
    o.inline_bytes.resize(text.size());
    std::memcpy(o.inline_bytes.data(), text.data(), text.size());
    o.unit = layer.prefix;
    result.out.push_back(std::move(o));
  }
  if (options.markers != MarkerDialect::tensor) result.header_markers[layer.prefix] = r.marker;
}

// Pass 1. Layers are quantized in batches run side by side on the thread pool
// (the reference quantizers are single-threaded per layer); a batch holds at
// most kBatchBytes of f32 weights, or one layer when it is larger (which then
// runs alone and may use the pool itself). Results are spilled in layer
// order, so the output does not depend on the thread count.
Quantized quantize_pass(const std::vector<Job>& jobs, const QuantizeOptions& options, SpillFile& spill,
                        QuantizeReport& report) {
  Quantized result;
  size_t to_quantize = 0;
  uint64_t quantize_bytes = 0;
  for (const Job& job : jobs)
    if (!job.rule->keeps()) {
      ++to_quantize;
      quantize_bytes += job.layer->tensor("weight").data.size();
    }
  QuantizeProgress progress{"quantize", 0, to_quantize, 0, quantize_bytes};
  if (options.progress) options.progress(progress);

  const size_t threads = static_cast<size_t>(std::max(1, num_threads()));
  size_t next = 0;
  while (next < jobs.size()) {
    std::vector<size_t> batch;
    uint64_t batch_bytes = 0;
    while (next < jobs.size() && batch.size() < threads) {
      const Job& job = jobs[next];
      const TensorView& weight = job.layer->tensor("weight");
      if (job.rule->keeps()) {
        QuantizedLayerReport entry = layer_entry(*job.layer);
        entry.output_bytes = entry.source_bytes;
        entry.format = "keep";
        report.layers.push_back(std::move(entry));
        ++next;
        continue;
      }
      uint64_t need = static_cast<uint64_t>(weight.numel()) * sizeof(float);
      if (!batch.empty() && batch_bytes + need > kBatchBytes) break;
      batch.push_back(next++);
      batch_bytes += need;
    }
    std::vector<LayerResult> results(batch.size());
    util::parallel_for(static_cast<int64_t>(batch.size()), 1, [&](int64_t b, int64_t e, int) {
      for (int64_t i = b; i < e; ++i) results[i] = quantize_layer(*jobs[batch[i]].layer, *jobs[batch[i]].rule);
    });
    for (size_t i = 0; i < batch.size(); ++i) {
      const Job& job = jobs[batch[i]];
      const Layer& layer = *job.layer;
      LayerResult& r = results[i];
      QuantizedLayerReport entry = layer_entry(layer);
      progress.done++;
      progress.bytes_done += entry.source_bytes;
      if (!r.error.empty()) {
        if (!job.rule->fallback_keep)
          fail("layer '{}' [{}, {}]: {} ({}) cannot hold it: {} (add fallback=keep to keep such "
               "layers unquantized)",
               layer.prefix, entry.out_features, entry.in_features, job.rule->format->name,
               job.rule->origin, r.error);
        entry.format = "keep";
        entry.output_bytes = entry.source_bytes;
        entry.fell_back = true;
        entry.reason = r.error;
        report.layers.push_back(std::move(entry));
        if (options.progress) options.progress(progress);
        continue;
      }
      result.replaced.insert(layer.tensor("weight").name);
      entry.format = std::string(job.rule->format->name);
      add_layer_output(layer, r, options, spill, result, entry);
      entry.marker = r.marker;
      report.layers.push_back(std::move(entry));
      if (options.progress) options.progress(progress);
    }
  }
  std::sort(report.layers.begin(), report.layers.end(),
            [](const QuantizedLayerReport& a, const QuantizedLayerReport& b) { return a.prefix < b.prefix; });
  return result;
}

// The output list: copies of every source tensor not replaced, plus the
// quantized tensors, sorted by name; each in the unit (layer) it belongs to.
std::vector<OutTensor> output_list(const Checkpoint& source, const LayerSet& set, Quantized& quantized) {
  std::map<std::string, std::string> unit_of;
  for (const Layer& layer : set.layers) {
    for (const auto& [role, view] : layer.tensors) unit_of[view.name] = layer.prefix;
    unit_of[layer.prefix + std::string(kMarkerSuffix)] = layer.prefix;
  }
  std::vector<OutTensor> out = std::move(quantized.out);
  for (const TensorView& t : source.tensors()) {
    if (quantized.replaced.count(t.name)) continue;
    OutTensor o;
    o.name = t.name;
    o.dtype = t.dtype;
    o.shape = t.shape;
    o.bytes = t.data.size();
    o.source = &t;
    auto unit = unit_of.find(t.name);
    o.unit = unit != unit_of.end() ? unit->second : t.name;
    out.push_back(std::move(o));
  }
  std::sort(out.begin(), out.end(), [](const OutTensor& a, const OutTensor& b) { return a.name < b.name; });
  for (size_t i = 1; i < out.size(); ++i)
    if (out[i].name == out[i - 1].name)
      fail("tensor '{}' would be written twice: a source tensor has the name of a quantized "
           "layer's output (layer '{}')",
           out[i].name, out[i].unit);
  return out;
}

// Pass 2: every shard into the staging folder, then the index when sharded.
void write_pass(const Checkpoint& source, const LayerSet& set, const Target& target, const StagingDir& staging,
                const SpillFile& spill, const std::vector<OutTensor>& out, const nlohmann::json& new_markers,
                const QuantizeOptions& options, QuantizeReport& report) {
  std::vector<Shard> shards = assign_shards(out, options.shard_size, target.folder);
  std::map<std::string, std::string> base_meta;
  if (!source.files().empty()) base_meta = source.files()[0].metadata;
  base_meta.erase(std::string(kHeaderMarkersKey));
  nlohmann::json header_markers = source_header_markers(source);
  for (const auto& [prefix, marker] : new_markers.items()) header_markers[prefix] = marker;
  std::map<std::string, std::string> marker_unit;
  for (const Layer& layer : set.layers) marker_unit[layer.prefix] = layer.prefix;

  QuantizeProgress writing{"write", 0, out.size(), 0, 0};
  for (const OutTensor& o : out) writing.bytes_total += o.bytes;
  if (options.progress) options.progress(writing);
  std::vector<std::byte> buffer;
  std::map<std::string, std::string> weight_map;
  for (size_t s = 0; s < shards.size(); ++s) {
    const Shard& shard = shards[s];
    std::string name = shard.file_name.empty() ? target.final_path.filename().string() : shard.file_name;
    SafetensorsWriter writer((staging.path() / name).string(),
                             shard_metadata(base_meta, header_markers, marker_unit, shard, s == 0));
    for (size_t i : shard.tensors) writer.declare(out[i].name, out[i].dtype, out[i].shape);
    for (size_t i : shard.tensors) {
      const OutTensor& o = out[i];
      if (o.source != nullptr) {
        writer.write(o.source->data);
        release_pages(o.source->data);
      } else if (o.spilled) {
        spill.read(o.spill_offset, o.bytes, buffer);
        writer.write(buffer);
      } else {
        writer.write(o.inline_bytes);
      }
      weight_map[o.name] = name;
      report.output_bytes += o.bytes;
      report.tensors_written++;
      writing.done++;
      writing.bytes_done += o.bytes;
      if (options.progress) options.progress(writing);
    }
    writer.commit();
    report.files.push_back((target.folder ? target.final_path / name : target.final_path).string());
  }
  if (shards.size() > 1) {
    const char* index_name = "model.safetensors.index.json";
    write_shard_index((staging.path() / index_name).string(), weight_map, report.output_bytes);
    report.files.push_back((target.final_path / index_name).string());
  }
}

void move_into_place(const Target& target, StagingDir& staging) {
  // Durable before it is visible: every file was fsynced when written (the
  // shards by SafetensorsWriter::commit, the index by write_shard_index); the
  // staging folder's entries are synced before it is renamed, and the
  // parent's after the rename, so a power loss leaves no output or a whole one.
  const std::string what = target.final_path.string();
  std::error_code ec;
  if (target.folder) {
    quantize::sync_path(staging.path(), true, what);
    fs::rename(staging.path(), target.final_path, ec);
  } else {
    fs::rename(staging.path() / target.final_path.filename(), target.final_path, ec);
  }
  if (ec) fail("{}: cannot move the finished output into place: {}", what, ec.message());
  quantize::sync_path(target.parent, true, what);
  staging.finish();
}

QuantizeReport quantize_opened(const Checkpoint& source, const Recipe& recipe, const QuantizeOptions& options,
                               const Target& target, std::chrono::steady_clock::time_point start) {
  MarkerSet markers = collect_markers(source);
  LayerSet set = group_layers(source, markers);

  QuantizeReport report;
  for (const TensorView& t : source.tensors()) report.source_bytes += t.data.size();
  const std::vector<Job> jobs = decide(set, recipe, report);

  StagingDir staging(target.parent, target.final_path.filename().string(), options.watchdog);
  for (const fs::path& stale : staging.removed_stale())
    report.warnings.push_back(
        fmt::format("removed {}: a staging folder left by a process that no longer runs", stale.string()));
  SpillFile spill(staging.path());
  Quantized quantized = quantize_pass(jobs, options, spill, report);
  const nlohmann::json new_markers = std::move(quantized.header_markers);
  const std::vector<OutTensor> out = output_list(source, set, quantized);
  write_pass(source, set, target, staging, spill, out, new_markers, options, report);
  // Everything above read the source through its mapping: if another process
  // truncated it meanwhile, those reads returned zeros. Nothing goes in place.
  source.check_intact();
  move_into_place(target, staging);
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

}  // namespace

QuantizeReport quantize_checkpoint(const std::vector<std::string>& source_paths, const Recipe& recipe,
                                   const QuantizeOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  const Checkpoint source = Checkpoint::open(source_paths);
  // First of all: -o must not name a source file (whatever else is wrong with it).
  if (!options.output.empty()) refuse_output_over_inputs(options.output, source.source_paths());
  const Target target = resolve_target(options.output, options.shard_size);
  refuse_overwriting_source(source, target);
  try {
    return quantize_opened(source, recipe, options, target, start);
  } catch (const Error&) {
    // A source truncated under us explains any failure (a write from a
    // vanished page fails with EFAULT): say so, naming the file.
    source.check_intact();
    throw;
  }
}

}  // namespace mixq
