// Tensor-parallel admission (docs/DISPATCH.md §4). A row-parallel layer gives
// each rank K/tp input features, and that shard must keep the format's layout
// (ConvRot group, W4A4's 64, NVFP4's 16 block, MXFP8's 32 block): the format
// record's tp_input_unit, plus the profile's own rules (SGLang's
// supports_input_partition and create-time checks). A column-parallel layer
// gives each rank N/tp output rows; a fused layer (qkv 3 parts, fc1 2 parts)
// splits every logical part separately, so tp must divide each part, and the
// rank's rows must fit the format's layout (tp_output_unit: whole 128-row
// tiles of tile-packed SVDQuant; NVFP4 / MXFP8 rows without a bias to say the
// logical N keep their padding unit).
#include <fmt/format.h>

#include "mixq/format.hpp"
#include "plan/profile.hpp"

namespace mixq {

std::string Plan::input_partition_problem(const LayerPlan& entry, int64_t in_per_partition) const {
  const Layer& layer = entry.layer;
  if (in_per_partition <= 0)
    return fmt::format("input partition of {} features is empty", in_per_partition);
  if (!layer.format || !layer.problem.empty()) return {};  // an invalid layer is reported elsewhere
  if (profile_ && profile_->input_partition) {
    std::string problem = profile_->input_partition(entry, in_per_partition);
    if (!problem.empty()) return problem;
  }
  const int64_t unit = layer.format->tp_input_unit ? layer.format->tp_input_unit(layer) : 1;
  if (unit > 1 && in_per_partition % unit != 0)
    return fmt::format("a row-parallel shard of {} input features is not a multiple of {} ({} layout)",
                       in_per_partition, unit, layer.format->name);
  return {};
}

std::string Plan::tp_problem(const LayerPlan& entry, int tp) const {
  const Layer& layer = entry.layer;
  if (tp < 1) return fmt::format("tensor-parallel degree {} is not >= 1", tp);
  if (!layer.format || !layer.problem.empty()) return {};
  if (tp == 1) return {};  // nothing is split (validation already checked the layout at full K)
  switch (entry.parallel) {
    case Parallel::replicated:
      return {};
    case Parallel::row: {
      const int64_t k = layer.in_features;
      if (k % tp != 0)
        return fmt::format("row-parallel: {} input features do not split into {} equal shards", k, tp);
      if (std::string problem = input_partition_problem(entry, k / tp); !problem.empty()) return problem;
      break;
    }
    case Parallel::column: {
      const int64_t n = layer.out_features;
      if (n % entry.parts != 0)
        return fmt::format("fused layer: {} output features do not form {} equal parts", n, entry.parts);
      const int64_t part = n / entry.parts;
      if (part % tp != 0) {
        if (entry.parts > 1)
          return fmt::format("column-parallel: each of the {} fused parts ({} outputs) must split into {}",
                             entry.parts, part, tp);
        return fmt::format("column-parallel: {} output features do not split into {}", n, tp);
      }
      const int64_t unit = layer.format->tp_output_unit ? layer.format->tp_output_unit(layer) : 1;
      if (unit > 1 && (part / tp) % unit != 0)
        return fmt::format("a column-parallel shard of {} output features{} is not a multiple of {} ({} layout)",
                           part / tp, entry.parts > 1 ? " per part" : "", unit, layer.format->name);
      break;
    }
  }
  if (profile_ && profile_->tp_rule) return profile_->tp_rule(entry, tp);
  return {};
}

std::vector<int> Plan::admitted_tp(int max_degree) const {
  std::vector<int> degrees;
  for (int tp = 1; tp <= max_degree; ++tp) {
    bool all = true;
    for (const LayerPlan& entry : layers_) {
      if (!tp_problem(entry, tp).empty()) {
        all = false;
        break;
      }
    }
    if (all) degrees.push_back(tp);
  }
  return degrees;
}

}  // namespace mixq
