#pragma once
// NVFP4 activations in comfy-kitchen's tensor layout (docs/FORMATS.md §3.2):
// what its quantize_nvfp4 returns and its scaled_mm_nvfp4 takes. The
// comfy-kitchen backend (python/mixq/comfy_kitchen) runs both through these,
// so a ComfyUI NVFP4 layer quantizes and decodes its input in C++ instead of
// element-wise torch code.
#include <cstdint>
#include <vector>

namespace mixq {

struct Nvfp4Packed {
  int64_t rows = 0, cols = 0;  // logical shape of the codes (cols a multiple of 16)
  // [rows, cols/2] bytes, two E2M1 codes each, the even column in the high nibble.
  std::vector<uint8_t> data;
  // E4M3 block scales (one per 16 columns) in the 128x4-tiled layout (§2.3):
  // [roundup(rows, 128), roundup(cols/16, 4)] bytes, padding 0.
  std::vector<uint8_t> scales;
};

// x [m, k] f32 row-major with k % 16 == 0 (pad16: rows padded to a multiple
// of 16 with zeros, as comfy-kitchen's pad_16x). Block scale
// e4m3(min((amax/6)/g, 448)), codes e2m1(clamp(x/(g·scale), ±6)), zero blocks
// all-zero codes: comfy-kitchen's eager quantize_nvfp4 with per_tensor_scale g.
// Error for a g that is not finite and > 0 or a k that is not a multiple of 16.
Nvfp4Packed quantize_nvfp4_packed(const float* x, int64_t m, int64_t k, float global_scale, bool pad16);

// The inverse without the global scale: out [m, k] = e2m1(code) · e4m3(block
// scale), for `data` [m, k/2] and `scales` as above (at least
// roundup(m,128)·roundup(k/16,4) bytes; checked by the caller).
void dequantize_nvfp4_packed(const uint8_t* data, const uint8_t* scales, int64_t m, int64_t k, float* out);

}  // namespace mixq
