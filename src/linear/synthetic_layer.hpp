#pragma once
// A layer quantized from random weights through its format record, without a
// checkpoint: for tests, `mixq bench` and the side-by-side benchmarks. Generic
// over the format table (no per-format code).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "mixq/checkpoint.hpp"
#include "mixq/format.hpp"
#include "mixq/layer.hpp"
#include "mixq/tensor.hpp"

namespace mixq::linear {

struct SyntheticLayer {
  std::vector<float> weight;         // the f32 source weight [n, k]
  std::vector<float> bias;           // [n]
  std::vector<OwnedTensor> tensors;  // what the format stored (+ "bias")
  Layer layer;                       // views into `tensors`, validated

  SyntheticLayer() = default;
  SyntheticLayer(const SyntheticLayer&) = delete;
  SyntheticLayer& operator=(const SyntheticLayer&) = delete;
};

// Quantizes `weight` [n, k] with `params` (format defaults applied here),
// adds an F32 bias when `bias` is non-empty, binds and validates the layer.
// Throws Error when the format has no quantizer or rejects the parameters.
std::unique_ptr<SyntheticLayer> make_synthetic_layer(const FormatTraits& format,
                                                     const nlohmann::json& params,
                                                     std::vector<float> weight, int64_t n,
                                                     int64_t k, std::vector<float> bias);

// Same with deterministic random weights (scale ~0.05) and bias.
std::unique_ptr<SyntheticLayer> make_random_layer(const FormatTraits& format,
                                                  const nlohmann::json& params, int64_t n,
                                                  int64_t k, uint64_t seed, bool with_bias = true);

// A synthetic layer written to a safetensors file in the temp directory (its
// tensors and its marker) and opened from there, as a real checkpoint's layer
// is: its views lie in the mapped file (TensorView::storage), so a Linear
// built from it may read the weight in place. The file is unlinked once
// mapped (the mapping stays while the views or a Linear hold it). Benchmarks
// measure that path with it.
struct MappedSyntheticLayer {
  Checkpoint checkpoint;
  LayerSet set;
  const Layer* layer = nullptr;
};
std::unique_ptr<MappedSyntheticLayer> map_synthetic_layer(const SyntheticLayer& synthetic);

}  // namespace mixq::linear
