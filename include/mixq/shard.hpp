#pragma once
// Tensor-parallel sharding (docs/TP.md): one rank's share of a planned layer.
// Per-rank checkpoints of a whole model: mixq/tp_shards.hpp.
//
// A column-parallel layer gives each rank N/degree output rows; a fused layer
// (qkv 3 parts, fc1 2 parts) gives it N/(parts·degree) rows of every part, in
// part order. A row-parallel layer gives each rank K/degree input features;
// its bias stays on rank 0 (the ranks' outputs are summed). Replicated layers
// (embeddings) and degree 1 give the whole layer. How each format's tensors
// follow (scale rows, swizzled block-scale tiles, groups, low-rank factors) is
// the format record's shard rule.
#include <cstdint>
#include <string>
#include <vector>

#include "mixq/layer.hpp"
#include "mixq/plan.hpp"
#include "mixq/tensor.hpp"

namespace mixq {

// Which share of a layer one rank holds.
struct ShardSpec {
  Parallel parallel = Parallel::column;
  int parts = 1;  // logical parts of a fused column-parallel layer
  int rank = 0;
  int degree = 1;
};

// One rank's layer: a validated Layer with the source's prefix, format and
// parameters, whose tensors keep the source names. Each tensor is a view into
// the source checkpoint where the layout allows (a contiguous band of rows, a
// per-tensor scale, a tensor every rank shares), otherwise a packed copy of
// this rank's share only, held here. Move-only (the views point into it); the
// Checkpoint must outlive it.
class LayerShard {
 public:
  LayerShard(ShardSpec spec, Layer layer, std::vector<OwnedTensor> owned);
  LayerShard(LayerShard&&) noexcept = default;
  LayerShard& operator=(LayerShard&&) noexcept = default;
  LayerShard(const LayerShard&) = delete;
  LayerShard& operator=(const LayerShard&) = delete;

  const Layer& layer() const { return layer_; }
  const ShardSpec& spec() const { return spec_; }
  // Bytes of the packed copies held here (0 when every tensor is a view).
  uint64_t copied_bytes() const;

 private:
  ShardSpec spec_;
  std::vector<OwnedTensor> owned_;
  Layer layer_;
};

// Rank `rank` of `degree` of a planned layer, split as the plan classified it
// (LayerPlan::parallel, parts). `Linear::create` and the format's dequantize
// work on the result. Throws Error naming the layer when the rank is out of
// range, the layer is invalid, or the plan does not admit the split (with the
// plan's own reason, Plan::tp_problem, as `mixq plan --tp` prints it).
LayerShard shard_layer(const Plan& plan, const LayerPlan& layer, int rank, int degree);

}  // namespace mixq
