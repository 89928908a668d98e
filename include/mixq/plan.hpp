#pragma once
// The plan: every linear layer of a checkpoint bound to the method that runs
// it, checked against a runtime profile (what ComfyUI or SGLang would accept)
// and a tensor-parallel degree (docs/DISPATCH.md §2-4).
//
// Plan::build never throws for a rejected checkpoint: it returns a plan with
// accepted() == false and error() saying why (with the exception kind the
// runtime would raise), and still lists every layer it could resolve. Callers
// that only want a runnable plan call require_accepted(). The plan holds views
// into the checkpoint: the Checkpoint must outlive it.
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "mixq/checkpoint.hpp"
#include "mixq/layer.hpp"
#include "mixq/marker.hpp"

namespace mixq {

struct Profile;  // a runtime's acceptance rules (src/plan/profile_*.cpp)

// The runtime profiles, "comfyui" first (the default).
std::span<const std::string_view> profile_names();

struct PlanOptions {
  std::string profile = "comfyui";  // comfyui | sglang | sglang-minimax-h3
  int tp = 1;                       // tensor-parallel degree to check, >= 1
};

// How tensor parallelism splits a layer (docs/DISPATCH.md §4, §8.1).
enum class Parallel {
  column,      // output features split; a fused layer splits each logical part
  row,         // input features split (K / tp per rank)
  replicated,  // every rank holds all of it (embeddings)
};
std::string_view parallel_name(Parallel parallel);

struct LayerPlan {
  // Format record (unquantized record for unmarked layers; null for an
  // unknown format name), bound tensors, params with defaults, logical [N, K].
  Layer layer;
  bool embedding = false;  // decided from the name (see topology.cpp)
  Parallel parallel = Parallel::column;
  int parts = 1;  // logical outputs of a fused column-parallel layer (qkv 3, fc1 2)
  // The method that runs the layer under the plan's profile, e.g. "nvfp4",
  // "int8_convrot", "fp8:dynamic"; "invalid" when the layer did not validate.
  std::string method;
  bool admits_tp = true;  // for the plan's tp
  // Why the profile rejects this layer or why it does not admit the tp; empty when fine.
  std::string reason;

  const std::string& prefix() const { return layer.prefix; }
  // The marker's format name; empty for unquantized layers.
  std::string format_name() const;
};

class Plan {
 public:
  static Plan build(const Checkpoint& checkpoint, const PlanOptions& options = {});

  const std::string& profile() const { return profile_name_; }
  int tp() const { return tp_; }
  // The profile accepts the checkpoint and every layer admits tp().
  bool accepted() const { return error_.empty(); }
  // Why not, one line (empty when accepted).
  const std::string& error() const { return error_; }
  // The runtime configuration the profile resolved to, e.g. "KitchenW4A4Config"
  // (empty for comfyui and for rejected checkpoints).
  const std::string& runtime_config() const { return runtime_config_; }
  const std::vector<LayerPlan>& layers() const { return layers_; }
  const MarkerSet& markers() const { return markers_; }
  const std::vector<std::string>& warnings() const { return warnings_; }

  // Exact-prefix lookup (no globbing); nullptr when no layer has that prefix.
  const LayerPlan* find(std::string_view prefix) const;
  // Throws Error(error()) unless accepted().
  void require_accepted() const;

  // Why a row-parallel shard of `in_per_partition` input features breaks the
  // layer's layout under this profile; empty when it is admitted
  // (SGLang's supports_input_partition plus the create-time checks, §4.1-4.2).
  std::string input_partition_problem(const LayerPlan& layer, int64_t in_per_partition) const;
  // Why `layer` cannot be split over `tp` ranks; empty when it can.
  std::string tp_problem(const LayerPlan& layer, int tp) const;
  // Every degree in 1..max_degree that every layer admits.
  std::vector<int> admitted_tp(int max_degree = 64) const;

  // The `mixq plan --json` object (docs/CLI.md), plus "runtime_config",
  // "warnings" and per layer "parallel", "parts", "out_features", "in_features".
  nlohmann::json to_json() const;

 private:
  const Profile* profile_ = nullptr;
  std::string profile_name_;
  int tp_ = 1;
  std::string error_;
  std::string runtime_config_;
  MarkerSet markers_;
  std::vector<LayerPlan> layers_;
  std::vector<std::string> warnings_;
};

}  // namespace mixq
