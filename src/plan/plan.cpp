// Plan::build: markers -> layers -> per-layer method, then strict accounting,
// layer validation, the profile's acceptance and the tensor-parallel check,
// in that order; the first failure becomes the plan's error (no exception, no
// silent fallback). Also the profile registry and the JSON form.
#include "mixq/plan.hpp"

#include <algorithm>
#include <array>

#include <fmt/format.h>

#include "mixq/error.hpp"
#include "mixq/escape.hpp"
#include "mixq/format.hpp"
#include "plan/profile.hpp"

namespace mixq {
namespace {

using nlohmann::json;

constexpr std::array<std::string_view, 3> kProfileNames{"comfyui", "sglang", "sglang-minimax-h3"};

// The format record's method for a valid layer; embeddings are gathered, not
// multiplied, so their method names the row-gather of that format.
std::string base_method(const LayerPlan& plan) {
  const Layer& layer = plan.layer;
  if (!layer.format || !layer.problem.empty()) return "invalid";
  std::string method = layer.format->method ? layer.format->method(layer) : std::string(layer.format->name);
  if (plan.embedding && layer.format->from_marker) method = "embedding:" + method;
  return method;
}

void blame(LayerPlan& layer, const std::string& reason) {
  if (layer.reason.empty()) layer.reason = reason;
}

void blame_prefixes(std::vector<LayerPlan>& layers, const std::vector<std::string>& prefixes,
                    const std::string& reason) {
  for (LayerPlan& layer : layers)
    if (std::binary_search(prefixes.begin(), prefixes.end(), layer.prefix())) blame(layer, reason);
}

bool accounting_failed(const Accounting& found) {
  return !found.orphan_markers.empty() || !found.missing_markers.empty() || !found.unclaimed.empty();
}

}  // namespace

std::span<const std::string_view> profile_names() { return kProfileNames; }

const Profile* find_profile(std::string_view name) {
  for (const Profile* profile : {&comfyui_profile(), &sglang_profile(), &sglang_minimax_h3_profile()})
    if (profile->name == name) return profile;
  return nullptr;
}

const Marker* PlanState::marker(const LayerPlan& layer) const {
  auto it = markers.markers.find(layer.prefix());
  return it == markers.markers.end() ? nullptr : &it->second;
}

std::string LayerPlan::format_name() const {
  if (layer.format && !layer.format->from_marker) return {};
  return layer.format ? std::string(layer.format->name) : layer.declared_format;
}

Plan Plan::build(const Checkpoint& checkpoint, const PlanOptions& options) {
  Plan plan;
  plan.profile_ = find_profile(options.profile);
  if (!plan.profile_)
    throw UsageError(fmt::format("unknown profile '{}' (expected comfyui, sglang or sglang-minimax-h3)",
                                 options.profile));
  if (options.tp < 1) throw UsageError(fmt::format("tensor-parallel degree must be >= 1, got {}", options.tp));
  plan.profile_name_ = options.profile;
  plan.tp_ = options.tp;
  const Profile& profile = *plan.profile_;
  plan.warnings_ = checkpoint.warnings();

  // Data layouts the reference safetensors reader refuses (gaps between
  // tensors, trailing bytes): the runtimes read with it.
  const std::string_view runtime = profile.name.substr(0, profile.name.find('-'));  // "sglang-minimax-h3" -> sglang
  for (const FileInfo& file : checkpoint.files())
    if (!file.reference_reader_error.empty())
      plan.warnings_.push_back(fmt::format(
          "risk: {} reads {} with the safetensors library, which would raise SafetensorError: Error while "
          "deserializing header: {}",
          runtime, file.path, file.reference_reader_error));

  LayerSet set;
  Accounting found;
  try {
    plan.markers_ = collect_markers(checkpoint);
    set = group_layers(checkpoint, plan.markers_);
    found = account(plan.markers_, set);
  } catch (const MarkerConflict& e) {
    plan.error_ = profile.marker_conflict ? profile.marker_conflict(e) : std::string(e.what());
    return plan;
  } catch (const Error& e) {
    plan.error_ = e.what();
    return plan;
  }
  for (const auto& w : plan.markers_.warnings) plan.warnings_.push_back(w);
  for (const auto& w : set.warnings) plan.warnings_.push_back(w);

  for (Layer& layer : set.layers) {
    LayerPlan entry;
    entry.layer = std::move(layer);
    entry.embedding = is_embedding_name(entry.prefix());
    classify_parallel(entry.prefix(), entry.parallel, entry.parts);
    for (const auto& w : entry.layer.warnings)  // the format's warnings name the layer already
      plan.warnings_.push_back(w.find(entry.prefix()) == std::string::npos
                                   ? fmt::format("layer '{}': {}", entry.prefix(), w)
                                   : w);
    plan.layers_.push_back(std::move(entry));
  }
  PlanState state{checkpoint, plan.markers_, plan.layers_, {}, {}};
  for (LayerPlan& entry : plan.layers_) {
    entry.method = base_method(entry);
    if (entry.method != "invalid" && !entry.embedding && profile.method)
      entry.method = profile.method(state, entry, entry.method);
  }

  // 1. Strict accounting.
  if (accounting_failed(found)) {
    plan.error_ = profile.accounting(state, found);
    blame_prefixes(plan.layers_, found.orphan_markers, "marker without a weight tensor");
    blame_prefixes(plan.layers_, found.missing_markers, "quantized weight without a comfy_quant marker");
  }
  // 2. Layers whose tensors do not fit their declared (known) format.
  if (plan.error_.empty()) {
    for (LayerPlan& entry : plan.layers_) {
      if (!entry.layer.format || entry.layer.problem.empty()) continue;
      blame(entry, entry.layer.problem);
      if (plan.error_.empty()) plan.error_ = entry.layer.problem;
    }
  }
  // 3. The runtime's acceptance (unknown formats are the profile's to phrase).
  if (plan.error_.empty()) {
    plan.error_ = profile.resolve(state);
    plan.runtime_config_ = state.config;
  }
  for (std::string& w : state.warnings) plan.warnings_.push_back(std::move(w));
  if (plan.error_.empty()) {
    for (LayerPlan& entry : plan.layers_) {
      if (entry.layer.format) continue;
      blame(entry, entry.layer.problem);
      plan.error_ = entry.layer.problem;  // a profile must never accept an unknown format
      break;
    }
  }
  // 4. Tensor parallelism, layer by layer.
  std::vector<std::string> refused;
  for (LayerPlan& entry : plan.layers_) {
    const std::string problem = plan.tp_problem(entry, plan.tp_);
    if (problem.empty()) continue;
    entry.admits_tp = false;
    blame(entry, problem);
    refused.push_back(fmt::format("{} ({})", entry.prefix(), problem));
  }
  if (plan.error_.empty() && !refused.empty())
    plan.error_ = fmt::format("--tp {}: {} layer(s) do not admit the split, first: {}", plan.tp_,
                              refused.size(), refused.front());
  return plan;
}

const LayerPlan* Plan::find(std::string_view prefix) const {
  auto it = std::lower_bound(layers_.begin(), layers_.end(), prefix,
                             [](const LayerPlan& l, std::string_view p) { return l.prefix() < p; });
  return it != layers_.end() && it->prefix() == prefix ? &*it : nullptr;
}

void Plan::require_accepted() const {
  if (!accepted()) throw Error(error_);
}

json Plan::to_json() const {
  json layers = json::array();
  for (const LayerPlan& l : layers_) {
    const std::string format = l.format_name();
    layers.push_back({{"prefix", l.prefix()},
                      {"format", format.empty() ? json(nullptr) : json(format)},
                      {"method", l.method},
                      {"admits_tp", l.admits_tp},
                      {"reason", l.reason.empty() ? json(nullptr) : json(l.reason)},
                      {"parallel", std::string(parallel_name(l.parallel))},
                      {"parts", l.parts},
                      {"embedding", l.embedding},
                      {"out_features", l.layer.out_features},
                      {"in_features", l.layer.in_features}});
  }
  json out = {{"profile", profile_name_},
          {"tp", tp_},
          {"accepted", accepted()},
          {"error", error_.empty() ? json(nullptr) : json(error_)},
          {"runtime_config", runtime_config_.empty() ? json(nullptr) : json(runtime_config_)},
          {"layers", layers},
          {"warnings", warnings_}};
  make_json_utf8(out);  // messages may quote paths from the command line
  return out;
}

}  // namespace mixq
