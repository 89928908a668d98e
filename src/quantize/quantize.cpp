// mixq quantize: pass 1 quantizes layer by layer into a spill file, pass 2
// streams everything into SafetensorsWriter(s) in a staging folder, which is
// then renamed into place (include/mixq/quantize.hpp explains why).
#include "mixq/quantize.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include <fmt/format.h>

#include "mixq/checkpoint.hpp"
#include "mixq/error.hpp"
#include "mixq/format.hpp"
#include "mixq/layer.hpp"
#include "mixq/marker.hpp"
#include "mixq/numeric.hpp"
#include "mixq/safetensors_writer.hpp"
#include "kernels/parallel.hpp"
#include "mixq/linear.hpp"
#include "quantize/staging.hpp"

namespace mixq {
namespace fs = std::filesystem;
using quantize::release_pages;
using quantize::SpillFile;
using quantize::StagingDir;

namespace {

constexpr std::string_view kMetadataKey = "_quantization_metadata";

// One tensor of the output and where its bytes come from.
struct OutTensor {
  std::string name;
  DType dtype = DType::U8;
  Shape shape;
  uint64_t bytes = 0;
  const TensorView* source = nullptr;  // copied from the source checkpoint
  bool spilled = false;                // else read back from the spill file
  uint64_t spill_offset = 0;
  std::vector<std::byte> inline_bytes;  // marker tensors
  std::string unit;                     // layer prefix (or own name): kept in one shard
};

struct Target {
  fs::path final_path;  // the output file or folder
  fs::path parent;      // where the staging folder goes
  bool folder = false;
};

Target resolve_target(const std::string& output, uint64_t shard_size) {
  if (output.empty()) throw UsageError("quantize: -o OUT is required");
  Target t;
  t.final_path = fs::absolute(fs::path(output)).lexically_normal();
  if (t.final_path.filename().empty()) t.final_path = t.final_path.parent_path();
  bool safetensors_name = t.final_path.extension() == ".safetensors";
  if (shard_size > 0 && safetensors_name)
    throw UsageError(fmt::format(
        "-o {}: sharded output is a folder (model-00001-of-0000N.safetensors + index); give a "
        "folder path",
        output));
  t.folder = !safetensors_name;
  t.parent = t.final_path.parent_path();
  std::error_code ec;
  if (!fs::is_directory(t.parent, ec)) fail("{}: output folder does not exist", t.parent.string());
  if (t.folder && fs::exists(t.final_path, ec)) {
    if (!fs::is_directory(t.final_path, ec))
      fail("{}: exists and is not a folder", t.final_path.string());
    if (!fs::is_empty(t.final_path, ec))
      fail("{}: output folder exists and is not empty", t.final_path.string());
  }
  if (!t.folder && fs::is_directory(t.final_path, ec))
    fail("{}: output path is a folder", t.final_path.string());
  return t;
}

void refuse_overwriting_source(const Checkpoint& source, const Target& target) {
  std::error_code ec;
  for (const FileInfo& file : source.files()) {
    fs::path src = fs::absolute(file.path).lexically_normal();
    if (fs::exists(target.final_path, ec) && fs::equivalent(src, target.final_path, ec))
      fail("{}: the output would overwrite the source", target.final_path.string());
    if (target.folder) {
      auto rel = src.lexically_relative(target.final_path);
      if (!rel.empty() && *rel.begin() != "..")
        fail("{}: the source lies inside the output folder", target.final_path.string());
    }
  }
}

bool is_candidate(const Layer& layer) {
  if (layer.format != &unquantized_format() || !layer.problem.empty()) return false;
  const TensorView* weight = layer.find("weight");
  return weight != nullptr && weight->rank() == 2 && is_float(weight->dtype) &&
         weight->shape[0] > 0 && weight->shape[1] > 0;
}

// f32 view of a float weight; aligned F32 data is used in place.
const float* weight_f32(const TensorView& weight, std::vector<float>& buffer) {
  const auto* data = weight.data.data();
  if (weight.dtype == DType::F32 && reinterpret_cast<uintptr_t>(data) % alignof(float) == 0 &&
      weight.data.size() == static_cast<size_t>(weight.numel()) * sizeof(float))
    return reinterpret_cast<const float*>(data);
  buffer = to_f32(weight);
  return buffer.data();
}

bool role_known(const FormatTraits& format, const std::string& role) {
  for (const CompanionSpec& spec : format.tensors) {
    if (spec.role == role) return true;
    for (std::string_view alias : spec.aliases)
      if (alias == role) return true;
  }
  return false;
}

// The marker to write: the quantizer's, plus any parameter the rule set
// explicitly that the quantizer did not echo (e.g. full_precision_matrix_mult).
nlohmann::json complete_marker(const FormatTraits& format, const QuantizedLayer& q,
                               const RecipeRule& rule, const std::string& prefix) {
  nlohmann::json marker = q.marker.is_object() ? q.marker : nlohmann::json::object();
  if (!marker.contains("format")) marker["format"] = std::string(format.name);
  if (!marker["format"].is_string() || marker["format"].get<std::string>() != format.name)
    fail("layer '{}': quantizer of '{}' wrote a marker for '{}'", prefix, format.name,
         marker["format"].dump());
  for (const auto& [key, value] : rule.params.items())
    if (!marker.contains(key) && !format.quantize_options.contains(key)) marker[key] = value;
  return marker;
}

// What the quantizer gets: marker parameters with defaults applied, plus the
// quantizer-only options (FormatTraits::quantize_options) with theirs.
nlohmann::json quantizer_params(const FormatTraits& format, const RecipeRule& rule) {
  nlohmann::json marker_params = nlohmann::json::object();
  for (const auto& [key, value] : rule.params.items())
    if (!format.quantize_options.contains(key)) marker_params[key] = value;
  nlohmann::json params = apply_defaults(format, marker_params);
  for (const auto& [key, value] : format.quantize_options.items())
    params[key] = rule.params.contains(key) ? rule.params[key] : value;
  return params;
}

// Binds the quantizer's output like a reader would and lets the format's own
// validator judge it: what we write must load.
void validate_output(const FormatTraits& format, const QuantizedLayer& q,
                     const nlohmann::json& marker, const Layer& source, int64_t n, int64_t k) {
  Layer check;
  check.prefix = source.prefix;
  check.format = &format;
  check.declared_format = std::string(format.name);
  nlohmann::json params = marker;
  params.erase("format");
  check.params = apply_defaults(format, params);
  check.marker_source = "quantizer output";
  for (const OwnedTensor& t : q.tensors) {
    if (!role_known(format, t.name))
      fail("layer '{}': quantizer of '{}' produced unknown tensor role '{}'", source.prefix,
           format.name, t.name);
    TensorView view = t.view();
    view.name = source.prefix + "." + t.name;
    check.tensors[t.name] = view;
  }
  if (const TensorView* bias = source.find("bias")) check.tensors["bias"] = *bias;
  validate_layer(check);
  if (check.warnings.empty() && (check.out_features != n || check.in_features != k))
    fail("layer '{}': quantized '{}' reads back as [{}, {}], source is [{}, {}]", source.prefix,
         format.name, check.out_features, check.in_features, n, k);
}

// Header markers already present in the source files.
nlohmann::json source_header_markers(const Checkpoint& source) {
  nlohmann::json layers = nlohmann::json::object();
  for (const FileInfo& file : source.files()) {
    auto it = file.metadata.find(std::string(kMetadataKey));
    if (it == file.metadata.end()) continue;
    auto json = nlohmann::json::parse(it->second, nullptr, false);
    if (json.is_object() && json.contains("layers") && json["layers"].is_object())
      for (const auto& [prefix, marker] : json["layers"].items()) layers[prefix] = marker;
  }
  return layers;
}

// f32 weights of one batch of layers quantized side by side.
constexpr uint64_t kBatchBytes = uint64_t{256} << 20;

struct LayerResult {
  QuantizedLayer q;
  nlohmann::json marker;
  std::string error;  // the format refused the layer
};

// Quantizes and self-validates one layer; runs on a pool thread. Releases the
// source pages of the weight when done.
LayerResult quantize_layer(const Layer& layer, const RecipeRule& rule) {
  const FormatTraits& format = *rule.format;
  const TensorView& weight = layer.tensor("weight");
  const int64_t n = weight.shape[0], k = weight.shape[1];
  LayerResult r;
  try {
    std::vector<float> buffer;
    const float* w = weight_f32(weight, buffer);
    r.q = format.quantize(w, n, k, quantizer_params(format, rule));
    r.marker = complete_marker(format, r.q, rule, layer.prefix);
    validate_output(format, r.q, r.marker, layer, n, k);
  } catch (const Error& e) {
    r = LayerResult{};
    r.error = e.what();
  }
  release_pages(weight.data);
  return r;
}

struct Shard {
  std::string file_name;
  std::vector<size_t> tensors;  // indices into the sorted output list
  std::set<std::string> units;
};

std::vector<Shard> assign_shards(const std::vector<OutTensor>& out, uint64_t shard_size,
                                 bool folder) {
  // Units in order of their first tensor; a unit never spans two shards.
  std::vector<std::string> order;
  std::map<std::string, std::vector<size_t>> members;
  std::map<std::string, uint64_t> unit_bytes;
  for (size_t i = 0; i < out.size(); ++i) {
    auto [it, fresh] = members.try_emplace(out[i].unit);
    if (fresh) order.push_back(out[i].unit);
    it->second.push_back(i);
    unit_bytes[out[i].unit] += out[i].bytes;
  }
  std::vector<Shard> shards(1);
  uint64_t current = 0;
  for (const std::string& unit : order) {
    if (shard_size > 0 && current > 0 && current + unit_bytes[unit] > shard_size) {
      shards.emplace_back();
      current = 0;
    }
    Shard& shard = shards.back();
    shard.tensors.insert(shard.tensors.end(), members[unit].begin(), members[unit].end());
    shard.units.insert(unit);
    current += unit_bytes[unit];
  }
  for (Shard& shard : shards) std::sort(shard.tensors.begin(), shard.tensors.end());
  if (shards.size() == 1) {
    shards[0].file_name = folder ? "model.safetensors" : "";
  } else {
    for (size_t i = 0; i < shards.size(); ++i)
      shards[i].file_name =
          fmt::format("model-{:05d}-of-{:05d}.safetensors", i + 1, shards.size());
  }
  return shards;
}

std::map<std::string, std::string> shard_metadata(
    const std::map<std::string, std::string>& base, const nlohmann::json& header_markers,
    const std::map<std::string, std::string>& marker_unit, const Shard& shard, bool first) {
  std::map<std::string, std::string> meta = base;
  nlohmann::json layers = nlohmann::json::object();
  for (const auto& [prefix, marker] : header_markers.items()) {
    auto unit = marker_unit.find(prefix);
    bool here = unit != marker_unit.end() ? shard.units.count(unit->second) > 0 : first;
    if (here) layers[prefix] = marker;
  }
  if (!layers.empty()) {
    nlohmann::json doc = {{"format_version", "1.0"}, {"layers", layers}};
    meta[std::string(kMetadataKey)] = doc.dump();
  }
  return meta;
}

}  // namespace

QuantizeReport quantize_checkpoint(const std::vector<std::string>& source_paths,
                                   const Recipe& recipe, const QuantizeOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  Target target = resolve_target(options.output, options.shard_size);
  Checkpoint source = Checkpoint::open(source_paths);
  refuse_overwriting_source(source, target);
  MarkerSet markers = collect_markers(source);
  LayerSet set = group_layers(source, markers);

  QuantizeReport report;
  for (const TensorView& t : source.tensors()) report.source_bytes += t.data.size();

  // Which layer each source tensor belongs to (for sharding), and decisions.
  std::map<std::string, std::string> unit_of;
  for (const Layer& layer : set.layers) {
    for (const auto& [role, view] : layer.tensors) unit_of[view.name] = layer.prefix;
    unit_of[layer.prefix + ".comfy_quant"] = layer.prefix;
  }
  struct Job {
    const Layer* layer;
    const RecipeRule* rule;
  };
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

  StagingDir staging(target.parent, target.final_path.filename().string(), options.watchdog);
  SpillFile spill(staging.path());

  // ---- pass 1: quantize each layer, spill its tensors -------------------
  std::vector<OutTensor> out;
  std::set<std::string> replaced;  // source weights superseded by quantized ones
  nlohmann::json new_markers = nlohmann::json::object();
  size_t to_quantize = 0;
  uint64_t quantize_bytes = 0;
  for (const Job& job : jobs)
    if (!job.rule->keeps()) {
      ++to_quantize;
      quantize_bytes += job.layer->tensor("weight").data.size();
    }
  QuantizeProgress progress{"quantize", 0, to_quantize, 0, quantize_bytes};
  if (options.progress) options.progress(progress);

  // Layers are quantized in batches run side by side on the thread pool (the
  // reference quantizers are single-threaded per layer); a batch holds at
  // most kBatchBytes of f32 weights, or one layer when it is larger (which
  // then runs alone and may use the pool itself). Results are spilled in
  // layer order, so the output does not depend on the thread count.
  const size_t threads = static_cast<size_t>(std::max(1, num_threads()));
  size_t next = 0;
  while (next < jobs.size()) {
    std::vector<size_t> batch;
    uint64_t batch_bytes = 0;
    while (next < jobs.size() && batch.size() < threads) {
      const Job& job = jobs[next];
      const TensorView& weight = job.layer->tensor("weight");
      if (job.rule->keeps()) {
        QuantizedLayerReport entry;
        entry.prefix = job.layer->prefix;
        entry.out_features = weight.shape[0];
        entry.in_features = weight.shape[1];
        entry.source_bytes = entry.output_bytes = weight.data.size();
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
    kernels::parallel_for(static_cast<int64_t>(batch.size()), 1, [&](int64_t b, int64_t e, int) {
      for (int64_t i = b; i < e; ++i) results[i] = quantize_layer(*jobs[batch[i]].layer, *jobs[batch[i]].rule);
    });
    for (size_t i = 0; i < batch.size(); ++i) {
      const Job& job = jobs[batch[i]];
      const Layer& layer = *job.layer;
      const TensorView& weight = layer.tensor("weight");
      LayerResult& r = results[i];
      QuantizedLayerReport entry;
      entry.prefix = layer.prefix;
      entry.out_features = weight.shape[0];
      entry.in_features = weight.shape[1];
      entry.source_bytes = weight.data.size();
      progress.done++;
      progress.bytes_done += weight.data.size();
      if (!r.error.empty()) {
        if (!job.rule->fallback_keep)
          fail("layer '{}' [{}, {}]: {} ({}) cannot hold it: {} (add fallback=keep to keep such "
               "layers unquantized)",
               layer.prefix, entry.out_features, entry.in_features, job.rule->format->name,
               job.rule->origin, r.error);
        entry.format = "keep";
        entry.output_bytes = weight.data.size();
        entry.fell_back = true;
        entry.reason = r.error;
        report.layers.push_back(std::move(entry));
        if (options.progress) options.progress(progress);
        continue;
      }
      replaced.insert(weight.name);
      entry.format = std::string(job.rule->format->name);
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
        out.push_back(std::move(o));
        std::vector<std::byte>().swap(t.data);
      }
      if (options.markers != MarkerDialect::header) {
        std::string text = marker_json(r.marker);
        OutTensor o;
        o.name = layer.prefix + ".comfy_quant";
        o.dtype = DType::U8;
        o.shape = {static_cast<int64_t>(text.size())};
        o.bytes = text.size();
        o.inline_bytes.resize(text.size());
        std::memcpy(o.inline_bytes.data(), text.data(), text.size());
        o.unit = layer.prefix;
        out.push_back(std::move(o));
      }
      if (options.markers != MarkerDialect::tensor) new_markers[layer.prefix] = r.marker;
      entry.marker = r.marker;
      report.layers.push_back(std::move(entry));
      if (options.progress) options.progress(progress);
    }
  }
  std::sort(report.layers.begin(), report.layers.end(),
            [](const QuantizedLayerReport& a, const QuantizedLayerReport& b) { return a.prefix < b.prefix; });

  // ---- the output list: copies + quantized tensors, sorted by name --------
  for (const TensorView& t : source.tensors()) {
    if (replaced.count(t.name)) continue;
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
  std::sort(out.begin(), out.end(),
            [](const OutTensor& a, const OutTensor& b) { return a.name < b.name; });
  for (size_t i = 1; i < out.size(); ++i)
    if (out[i].name == out[i - 1].name)
      fail("tensor '{}' would be written twice: a source tensor has the name of a quantized "
           "layer's output (layer '{}')",
           out[i].name, out[i].unit);

  // ---- pass 2: write shards into the staging folder ----------------------
  std::vector<Shard> shards = assign_shards(out, options.shard_size, target.folder);
  std::map<std::string, std::string> base_meta;
  if (!source.files().empty()) base_meta = source.files()[0].metadata;
  base_meta.erase(std::string(kMetadataKey));
  nlohmann::json header_markers = source_header_markers(source);
  for (const auto& [prefix, marker] : new_markers.items()) header_markers[prefix] = marker;
  std::map<std::string, std::string> marker_unit;
  for (const Layer& layer : set.layers) marker_unit[layer.prefix] = layer.prefix;

  QuantizeProgress writing{"write", 0, out.size(), 0, 0};
  for (const OutTensor& o : out) writing.bytes_total += o.bytes;
  if (options.progress) options.progress(writing);
  std::vector<std::byte> buffer;
  nlohmann::json weight_map = nlohmann::json::object();
  for (size_t s = 0; s < shards.size(); ++s) {
    const Shard& shard = shards[s];
    std::string name = shard.file_name.empty() ? target.final_path.filename().string()
                                               : shard.file_name;
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
  std::vector<std::byte>().swap(buffer);
  if (shards.size() > 1) {
    nlohmann::json index = {{"metadata", {{"total_size", report.output_bytes}}},
                            {"weight_map", weight_map}};
    const char* index_name = "model.safetensors.index.json";
    std::ofstream file(staging.path() / index_name, std::ios::binary);
    file << index.dump(2) << "\n";
    file.close();
    if (!file) fail("{}: cannot write the shard index", (staging.path() / index_name).string());
    report.files.push_back((target.final_path / index_name).string());
  }

  // ---- move into place ---------------------------------------------------
  std::error_code ec;
  if (target.folder) {
    fs::rename(staging.path(), target.final_path, ec);
  } else {
    fs::rename(staging.path() / target.final_path.filename(), target.final_path, ec);
  }
  if (ec) fail("{}: cannot move the finished output into place: {}", target.final_path.string(),
               ec.message());
  staging.finish();
  report.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

}  // namespace mixq
