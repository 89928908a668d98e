#pragma once
// Shared declarations of the `mixq._mixq` extension. Each bind_* function adds
// one concept to the module; module.cpp calls them in order.
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nanobind/nanobind.h>
#include <nlohmann/json.hpp>

#include "mixq/checkpoint.hpp"
#include "mixq/layer.hpp"
#include "mixq/linear.hpp"
#include "mixq/marker.hpp"
#include "mixq/plan.hpp"
#include "mixq/shard.hpp"

namespace mixq::py {

namespace nb = nanobind;

// One opened checkpoint, shared by the Python Checkpoint object and every
// Linear made from it: a Linear holds a shared_ptr, so the mapping outlives
// the Python Checkpoint (the Python-side keep_alive is then only a courtesy).
struct CheckpointState {
  explicit CheckpointState(Checkpoint c) : checkpoint(std::move(c)) {}
  Checkpoint checkpoint;
  std::vector<std::string> paths;  // as given to open()

  // Markers and layers, built on first use (open() reads headers only).
  // Thread-safe; throws mixq::Error for invalid markers.
  const LayerSet& layers();
  // The plan under `profile` (TP degree 1), built on first use and kept: a
  // tensor-parallel load asks it once per layer. Thread-safe.
  const Plan& plan(const std::string& profile);

 private:
  std::mutex mutex_;
  std::optional<MarkerSet> markers_;
  std::optional<LayerSet> layers_;
  std::map<std::string, std::unique_ptr<const Plan>> plans_;
};

// A layer's runtime linear as the Python Linear object.
struct PyLinear {
  std::shared_ptr<CheckpointState> owner;  // keeps the mapping alive; null once detached
  const Layer* layer = nullptr;            // inside owner->layers(), `shard` or `own`, never moves
  // The layer's description without its tensors, for a Linear built from
  // memory or detached from its checkpoint (dequantize() then refuses).
  std::unique_ptr<Layer> own;
  std::unique_ptr<Linear> linear;
  std::unique_ptr<LayerShard> shard;  // tp_size > 1: this rank's share of the layer (until detach())
  std::optional<ShardSpec> tp;        // which share, kept after detach() frees `shard`
  std::string method;                 // the format's method name, fixed when the Linear is built
  uint64_t stored_bytes = 0;          // the layer's (this rank's) tensor bytes as stored
};

// LinearOptions for kernel "auto" or "ref" (mixq::Error otherwise).
LinearOptions linear_options(const std::string& prefix, const std::string& kernel);

// Checkpoint.linear(prefix, kernel, tp_rank, tp_size, profile): finds the
// layer, takes rank tp_rank's share of it when tp_size > 1 (shard_layer under
// the profile's plan), and builds its Linear (GIL released while the weights
// are prepared).
std::shared_ptr<PyLinear> make_linear(const std::shared_ptr<CheckpointState>& owner,
                                      const std::string& prefix, const std::string& kernel, int tp_rank,
                                      int tp_size, const std::string& profile);

// nlohmann::json -> Python objects (dict keeps the JSON object's key order).
nb::object to_python(const nlohmann::json& value);

void bind_block_quant(nb::module_& m);
void bind_checkpoint(nb::module_& m);
void bind_from_tensors(nb::module_& m);
void bind_linear(nb::module_& m);
void bind_quantize(nb::module_& m);
void bind_save(nb::module_& m);

}  // namespace mixq::py
