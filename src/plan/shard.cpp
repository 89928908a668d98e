// shard_layer: one rank's share of a planned layer (mixq/shard.hpp). The plan
// decides whether the split is admitted; the format record's shard rule
// decides which bytes the rank holds; the result is validated by the format
// like any layer read from a file, and must have the rank's logical shape.
#include <optional>

#include <fmt/format.h>

#include "formats/shard_util.hpp"
#include "mixq/error.hpp"
#include "mixq/format.hpp"
#include "mixq/shard.hpp"

namespace mixq {

LayerShard::LayerShard(ShardSpec spec, Layer layer, std::vector<OwnedTensor> owned)
    : spec_(spec), owned_(std::move(owned)), layer_(std::move(layer)) {}

uint64_t LayerShard::copied_bytes() const {
  uint64_t bytes = 0;
  for (const OwnedTensor& t : owned_) bytes += t.data.size();
  return bytes;
}

LayerShard shard_layer(const Plan& plan, const LayerPlan& entry, int rank, int degree) {
  const Layer& layer = entry.layer;
  if (degree < 1) fail("layer '{}': tensor-parallel degree {} is not >= 1", layer.prefix, degree);
  if (rank < 0 || rank >= degree)
    fail("layer '{}': rank {} is out of range for tensor-parallel degree {} (ranks 0..{})", layer.prefix, rank,
         degree, degree - 1);
  if (!layer.format) fail("layer '{}': {}", layer.prefix, layer.problem);
  if (!layer.problem.empty())
    fail("layer '{}': cannot shard a layer that failed validation: {}", layer.prefix, layer.problem);
  if (const std::string problem = plan.tp_problem(entry, degree); !problem.empty())
    fail("layer '{}' does not admit --tp {}: {}", layer.prefix, degree, problem);
  if (!layer.format->shard) fail("layer '{}': format '{}' has no shard rule", layer.prefix, layer.format->name);

  const ShardSpec spec{entry.parallel, entry.parallel == Parallel::column ? entry.parts : 1, rank, degree};
  ShardCut cut;
  cut.side = degree == 1 || spec.parallel == Parallel::replicated ? ShardCut::Side::whole
             : spec.parallel == Parallel::column                  ? ShardCut::Side::column
                                                                  : ShardCut::Side::row;
  cut.parts = spec.parts;
  cut.rank = rank;
  cut.degree = degree;
  ShardBuilder builder(layer, cut);
  if (cut.side == ShardCut::Side::whole)
    builder.keep_all();
  else
    layer.format->shard(layer, builder);
  std::optional<LayerShard> shard;
  try {
    ShardedLayer done = builder.finish();
    shard.emplace(spec, std::move(done.layer), std::move(done.owned));
  } catch (const Error& e) {
    fail("layer '{}': rank {} of {} does not validate: {}", layer.prefix, rank, degree, e.what());
  }
  const Layer& out = shard->layer();
  const bool column = spec.parallel == Parallel::column, row = spec.parallel == Parallel::row;
  const int64_t want_n = column ? layer.out_features / degree : layer.out_features;
  const int64_t want_k = row ? layer.in_features / degree : layer.in_features;
  if (out.out_features != want_n || out.in_features != want_k)
    fail("layer '{}': rank {} of {} reads back as [{}, {}], expected [{}, {}]", layer.prefix, rank, degree,
         out.out_features, out.in_features, want_n, want_k);
  return std::move(*shard);
}

}  // namespace mixq
