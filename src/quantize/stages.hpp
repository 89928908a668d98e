#pragma once
// The stages of `mixq quantize` (quantize.cpp runs them in order):
//   1. target.cpp         where the output goes, and that it overwrites no source;
//   2. layer_quantizer.cpp one layer: float weight -> format tensors + marker, self-validated;
//   3. shard_plan.cpp     which output tensor goes into which file, and each file's header markers;
//   4. quantize.cpp       the two passes (quantize into a spill file, stream into the writers), the
//                          shard index (io/shard_index.hpp) and the final rename.
#include <cstdint>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "mixq/checkpoint.hpp"
#include "mixq/format.hpp"
#include "mixq/layer.hpp"
#include "mixq/recipe.hpp"

namespace mixq::quantize {

// ---- 1. the output path
struct Target {
  std::filesystem::path final_path;  // the output file or folder
  std::filesystem::path parent;      // where the staging folder goes
  bool folder = false;
};
Target resolve_target(const std::string& output, uint64_t shard_size);
void refuse_overwriting_source(const Checkpoint& source, const Target& target);

// ---- 2. one layer
// A float linear layer without a marker: what the recipe decides.
bool is_candidate(const Layer& layer);
struct LayerResult {
  QuantizedLayer q;
  nlohmann::json marker;
  std::string error;  // the format refused the layer
};
// Quantizes and self-validates one layer; runs on a pool thread. Releases the
// source pages of the weight when done.
LayerResult quantize_layer(const Layer& layer, const RecipeRule& rule);

// ---- 3. the output files
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
struct Shard {
  std::string file_name;
  std::vector<size_t> tensors;  // indices into the sorted output list
  std::set<std::string> units;
};
// Splits the (name-sorted) output into files of at most shard_size bytes (0 =
// one file), never splitting a unit.
std::vector<Shard> assign_shards(const std::vector<OutTensor>& out, uint64_t shard_size, bool folder);
// Header markers already present in the source files, by prefix.
nlohmann::json source_header_markers(const Checkpoint& source);
// One file's header metadata: the source's, with the header markers of the
// layers this shard holds (markers of no known layer go to the first shard).
std::map<std::string, std::string> shard_metadata(const std::map<std::string, std::string>& base,
                                                  const nlohmann::json& header_markers,
                                                  const std::map<std::string, std::string>& marker_unit,
                                                  const Shard& shard, bool first);

}  // namespace mixq::quantize
