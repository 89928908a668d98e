// NVFP4 activations in comfy-kitchen's layout (mixq/block_quant.hpp): the
// reference quantizer's codes and scales, packed and tiled.
#include "mixq/block_quant.hpp"

#include <algorithm>
#include <array>

#include "mixq/error.hpp"
#include "mixq/numeric.hpp"
#include "numeric/quantizers.hpp"
#include "numeric/swizzle.hpp"
#include "util/parallel.hpp"

namespace mixq {

Nvfp4Packed quantize_nvfp4_packed(const float* x, int64_t m, int64_t k, float global_scale, bool pad16) {
  if (k % 16 != 0) fail("NVFP4 activation: {} columns is not a multiple of 16", k);
  quant::Nvfp4Blocks b = quant::quantize_nvfp4(x, m, k, global_scale);  // rows padded to 16
  Nvfp4Packed out;
  out.rows = pad16 ? b.rows : m;
  out.cols = k;
  out.data.resize(static_cast<size_t>(out.rows * k / 2));
  for (size_t j = 0; j < out.data.size(); ++j)
    out.data[j] = static_cast<uint8_t>((b.codes[2 * j] << 4) | b.codes[2 * j + 1]);
  out.scales = swizzle_scales(b.block_scales.data(), out.rows, k / 16);
  return out;
}

void dequantize_nvfp4_packed(const uint8_t* data, const uint8_t* scales, int64_t m, int64_t k, float* out) {
  if (k % 16 != 0) fail("NVFP4 activation: {} columns is not a multiple of 16", k);
  std::array<float, 16> e2m1{};
  for (uint8_t c = 0; c < 16; ++c) e2m1[c] = e2m1_to_f32(c);
  const int64_t blocks = k / 16;
  util::parallel_for(m, std::max<int64_t>(1, 4096 / k), [&](int64_t begin, int64_t end, int) {
    for (int64_t r = begin; r < end; ++r)
      for (int64_t b = 0; b < blocks; ++b) {
        const float s = e4m3_to_f32(scales[swizzled_offset(r, b, blocks)]);
        const uint8_t* codes = data + r * (k / 2) + b * 8;
        float* y = out + r * k + b * 16;
        for (int i = 0; i < 8; ++i) {
          y[2 * i] = e2m1[codes[i] >> 4] * s;
          y[2 * i + 1] = e2m1[codes[i] & 0xF] * s;
        }
      }
  });
}

}  // namespace mixq
