// Plausibility of block-scaled layers (NVFP4, MXFP8) from their stored bytes:
// see block_checks.hpp for what is checked and what cannot be.
#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "formats/block_checks.hpp"

#include "mixq/layer.hpp"
#include "mixq/marker.hpp"
#include "mixq/numeric.hpp"
#include "numeric/swizzle.hpp"

namespace mixq {
namespace {

struct BlockSpec {
  int64_t block;              // elements per scale
  int64_t elements_per_byte;  // 2: packed nibbles, 1: one byte per element
  // |value| of element k of a stored row (in code units, before scaling).
  float (*magnitude)(const std::byte* row, int64_t k);
  float (*decode_scale)(uint8_t byte);
  float full_min, full_max;  // a well-formed block's largest |element|
  const char* expectation;   // for messages
};

float nvfp4_magnitude(const std::byte* row, int64_t k) {
  uint8_t byte = static_cast<uint8_t>(row[k / 2]);
  uint8_t code = (k % 2 == 0) ? static_cast<uint8_t>(byte >> 4) : static_cast<uint8_t>(byte & 0xF);
  return e2m1_to_f32(code & 0x7);  // high nibble = even element (§2.2a)
}

float fp8_magnitude(const std::byte* row, int64_t k) {
  return std::fabs(e4m3_to_f32(static_cast<uint8_t>(row[k])));
}

// The 4-D check of one layer; one LayerCheck named "block_scales". Scales are
// swizzled, or row-major [rows, blocks] when `row_major` (MXFP8 layers of
// SGLang's global rule).
LayerCheck check_blocks(const Layer& layer, const BlockSpec& spec, bool row_major = false) {
  LayerCheck result{"block_scales", true, ""};
  const TensorView* weight = layer.find("weight");
  const TensorView* scale = layer.find("weight_scale");
  if (weight == nullptr || scale == nullptr || weight->rank() != 2) {
    result.ok = false;
    result.detail = "needs a 2-D weight and a weight_scale";
    return result;
  }
  const int64_t rows = weight->shape[0];
  const int64_t row_bytes = weight->shape[1];
  const int64_t cols = row_bytes * spec.elements_per_byte;
  const int64_t blocks_per_row = cols / spec.block;
  const int64_t srows = row_major ? rows : swizzled_rows(rows);
  const int64_t scols = row_major ? blocks_per_row : swizzled_cols(blocks_per_row);
  if (cols % spec.block != 0 || static_cast<int64_t>(scale->data.size()) != srows * scols) {
    result.ok = false;
    result.detail = fmt::format("weight {} and {} scale bytes do not form {}-element blocks",
                                shape_str(weight->shape), scale->data.size(), spec.block);
    return result;
  }
  const auto* sbytes = reinterpret_cast<const uint8_t*>(scale->data.data());
  int64_t blocks = 0, empty = 0, off = 0, bad_scale = 0, codes_without_scale = 0,
          scale_without_codes = 0, pad_nonzero = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const std::byte* row = weight->data.data() + r * row_bytes;
    for (int64_t c = 0; c < blocks_per_row; ++c) {
      float s = spec.decode_scale(
          sbytes[row_major ? r * blocks_per_row + c : swizzled_offset(r, c, blocks_per_row)]);
      float largest = 0;
      for (int64_t k = c * spec.block; k < (c + 1) * spec.block; ++k)
        largest = std::max(largest, spec.magnitude(row, k));
      ++blocks;
      if (!std::isfinite(s) || s < 0) ++bad_scale;
      if (largest == 0) {
        ++empty;
        if (s != 0) ++scale_without_codes;
        continue;
      }
      if (s == 0) ++codes_without_scale;
      if (largest < spec.full_min || largest > spec.full_max) ++off;
    }
  }
  // Swizzle padding: rows past the stored rows, columns past the blocks.
  for (int64_t r = 0; r < srows && !row_major; ++r)
    for (int64_t c = (r < rows ? blocks_per_row : 0); c < scols; ++c)
      if (sbytes[swizzled_offset(r, c, blocks_per_row)] != 0) ++pad_nonzero;

  const int64_t full = blocks - empty;
  const double off_fraction = full > 0 ? static_cast<double>(off) / full : 0.0;
  result.ok = bad_scale == 0 && codes_without_scale == 0 && scale_without_codes == 0 &&
              pad_nonzero == 0 && off_fraction <= 0.05;
  result.detail = fmt::format("{} blocks: {:.1f}% of non-zero blocks off ({})", blocks,
                              100.0 * off_fraction, spec.expectation);
  if (bad_scale) result.detail += fmt::format(", {} negative or non-finite scales", bad_scale);
  if (codes_without_scale)
    result.detail += fmt::format(", {} blocks with codes but a zero scale", codes_without_scale);
  if (scale_without_codes)
    result.detail += fmt::format(", {} all-zero blocks with a non-zero scale", scale_without_codes);
  if (pad_nonzero)
    result.detail += fmt::format(", {} non-zero swizzle padding bytes (linear scale layout?)",
                                 pad_nonzero);
  return result;
}

}  // namespace

std::vector<LayerCheck> check_nvfp4_layout(const Layer& layer) {
  static const BlockSpec spec{16, 2, nvfp4_magnitude, e4m3_to_f32, 6.0f, 6.0f,
                              "expected max |code| = 6"};
  return {check_blocks(layer, spec)};
}

std::vector<LayerCheck> check_mxfp8_layout(const Layer& layer) {
  static const BlockSpec spec{32, 1, fp8_magnitude, e8m0_to_f32, 224.0f, 448.0f,
                              "expected max |element| in [224, 448]"};
  return {check_blocks(layer, spec, row_major_scales(layer.params))};
}

}  // namespace mixq
