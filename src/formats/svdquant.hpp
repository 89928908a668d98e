#pragma once
// svdquant_w4a4 (docs/FORMATS.md §3.8): a signed int4 residual with a scale
// per (64-group along K, output column), a low-rank fp branch and a per-input
// smoothing divisor. Activations are divided by the smooth factor and
// quantized per row and 64-group to int4 (signed, or unsigned after the
// +0.171875 post-GELU shift when "act_unsigned"); the low-rank branch sees the
// raw x:
//   y = Σ_g as[m,g]·ws[g,n]·Σ_{k∈g} qa·qw + (x·proj_down)·proj_upᵀ + b
//
// Stored tensors (roles; third-party files drop the "weight_" prefix of the
// last three, accepted as aliases):
//   natural:      weight I8 [N, K/2], weight_scale [K/64, N], weight_proj_up [N, R]
//   tile-packed ("layout": "kitchen_tile_packed_w4a4", N % 128 == 0):
//                 weight I8 [N/128, K/64, 32, 128], weight_scale [N/128, K/64, 128],
//                 weight_proj_up [N/128, R, 128]
//   both:         weight_proj_down [K, R], weight_smooth_factor [K]
// Float tensors are BF16 | F16 | F32. There is no quantizer (comfy-kitchen
// needs offline calibration: DeepCompressor / nunchaku).
#include <cstddef>
#include <cstdint>
#include <vector>

#include "mixq/format.hpp"
#include "mixq/layer.hpp"

namespace mixq::formats {

const FormatTraits& svdquant_w4a4_format();

inline constexpr float kSvdquantUnsignedShift = 0.171875f;  // nunchaku post-GELU shift
inline constexpr int64_t kSvdquantGroup = 64;
inline constexpr const char* kSvdquantTileLayout = "kitchen_tile_packed_w4a4";

// Every tensor of a validated layer in the natural layout, as arrays.
struct SvdquantTensors {
  int64_t n = 0, k = 0, rank = 0;
  bool act_unsigned = false;
  bool tile_packed = false;         // how it was stored
  std::vector<uint8_t> weight;      // [N, K/2] natural packed bytes (signed nibbles)
  std::vector<float> wscale;        // [K/64, N]
  std::vector<float> proj_down;     // [K, R]
  std::vector<float> proj_up;       // [N, R]
  std::vector<float> smooth;        // [K]
};
SvdquantTensors svdquant_tensors(const Layer& layer);

// Tile-pack mapping (§3.8, with t = n/128, q = (n%128)/4, i = n%4, kg = k/64):
//   packed[t, kg, q, 32·i + b] = natural[n, 32·kg + b]    (b: byte within the group)
//   scales_tile[t, g, j] = wscales[g, 128·t + j]
//   proj_up_tile[t, r, j] = proj_up[128·t + j, r]
// Requires n % 128 == 0 and k % 64 == 0. `to_natural` chooses the direction.
void svdquant_tile_weight(const uint8_t* from, uint8_t* to, int64_t n, int64_t k, bool to_natural);
void svdquant_tile_scales(const float* from, float* to, int64_t n, int64_t k, bool to_natural);
void svdquant_tile_proj_up(const float* from, float* to, int64_t n, int64_t rank, bool to_natural);

}  // namespace mixq::formats
