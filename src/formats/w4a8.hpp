#pragma once
// asym_w4a8_int8 (docs/FORMATS.md §3.7): ConvRot-rotated weights stored as
// 4-bit codes per group of `group_size` along K, decoded to int8 through a
// per-group relative scale (and an optional 16-level codebook), then run as
// the INT8 + ConvRot linear with the per-row `weight_s_channel` as its scale.
//
// Stored tensors (roles): weight I8 [N, K/2] (unsigned codes, low nibble =
// even k); weight_s_rel F8_E4M3 | U8 (E4M3 bytes) | F32 [N, K/gs];
// weight_s_channel F32 [N]; optional weight_codebook F32 [16]; optional
// weight_correction F32|F16|BF16 [K/gs, N] (asymmetric zero-point term).
#include <cstdint>
#include <vector>

#include "mixq/format.hpp"
#include "mixq/layer.hpp"

namespace mixq::formats {

const FormatTraits& asym_w4a8_int8_format();

// The fixed Lloyd-Max table of docs/FORMATS.md (§3.7 "Fixed table"): the codebook the
// quantizer stores in codebook mode.
extern const float kW4a8LloydMax[16];

// One code decoded to int8, bit-exact with comfy-kitchen:
// clamp(rint(lvl · s_rel), -127, 127) with lvl = codebook[code] (or code - 8
// when `codebook` is null) and an fp32 product. s_rel must be finite.
int8_t w4a8_decode_code(uint8_t code, float s_rel, const float* codebook);

// A validated layer's stored pieces, checked (non-finite s_rel / codebook is
// an Error) but not decoded: views into the layer's tensors (valid while the
// layer's data is) and small owned arrays.
struct W4a8Codes {
  int64_t n = 0, k = 0, group_size = 16, convrot_groupsize = 256;
  const uint8_t* codes = nullptr;       // weight [N, K/2]
  const uint8_t* s_rel_e4m3 = nullptr;  // weight_s_rel [N, K/gs] as E4M3 bytes (F8_E4M3 or U8), or
  const void* s_rel_f32 = nullptr;      // ... as f32 (unaligned)
  std::vector<float> codebook;          // [16] or empty (levels code - 8)
  std::vector<float> s_channel;         // [N]
};
W4a8Codes w4a8_codes(const Layer& layer);

// A validated layer's pieces as f32 / int8 arrays.
struct W4a8Decoded {
  int64_t n = 0, k = 0, group_size = 16, convrot_groupsize = 256;
  std::vector<int8_t> w8;          // [N, K], rotated basis
  std::vector<float> s_channel;    // [N]
  std::vector<float> correction;   // [K/gs, N] or empty
};
// Decodes the whole weight (throws Error on non-finite s_rel / codebook).
W4a8Decoded w4a8_decode(const Layer& layer);

}  // namespace mixq::formats
