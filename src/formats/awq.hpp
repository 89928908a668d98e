#pragma once
// awq_w4a16 (docs/FORMATS.md §3.9): unsigned 4-bit codes with a float scale
// and a float additive zero per (group of `group_size` along K, output column);
// W[n,k] = (q[n,k] - 8)·scale[k/G, n] + zeros[k/G, n]; activations stay float.
//
// Stored tensors (roles): weight I8 [N, K/2] (low nibble = even k);
// weight_scale and weight_zeros BF16 | F16 | F32 [K/G, N].
#include <cstdint>
#include <vector>

#include "mixq/format.hpp"
#include "mixq/layer.hpp"

namespace mixq::formats {

const FormatTraits& awq_w4a16_format();

// A validated layer's tensors as arrays (codes still packed).
struct AwqTensors {
  int64_t n = 0, k = 0, group_size = 64;
  const std::byte* codes = nullptr;  // [N, K/2] inside the layer's view (unaligned is fine: bytes)
  std::vector<float> scale;          // [K/G, N]
  std::vector<float> zeros;          // [K/G, N]
};
AwqTensors awq_tensors(const Layer& layer);

}  // namespace mixq::formats
